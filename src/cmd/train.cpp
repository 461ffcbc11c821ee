// `vitkd train` and `vitkd keys`: the configuration's command-line face.
#include <cstdio>

#include "cmd/commands.hpp"
#include "comm/world.hpp"
#include "config/config.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"

namespace vitkd {

int train_command(const std::vector<std::string>& rest) {
  if (rest.empty() || rest[0].rfind("--", 0) == 0)
    throw UserError("train: missing CONFIG.toml; usage: vitkd train CONFIG.toml [--set section.key=value ...]");
  std::vector<std::string> overrides;
  for (size_t i = 1; i < rest.size(); ++i) {
    if (rest[i] == "--set" && i + 1 < rest.size()) {
      overrides.push_back(rest[++i]);
    } else if (rest[i].rfind("--set=", 0) == 0) {
      overrides.push_back(rest[i].substr(6));
    } else {
      throw UserError("train: unexpected argument '" + rest[i] +
                      "'; usage: vitkd train CONFIG.toml [--set section.key=value ...]");
    }
  }
  const Config cfg = load_config(rest[0], overrides);
  return train_main(cfg, rest[0]);
}

int keys_main(const std::vector<std::string>&) {
  if (world().root())
    for (const auto& k : config_keys())
      std::printf("%-28s %-8s %-16s %s\n", k.name.c_str(), k.type.c_str(), k.def.c_str(),
                  k.help.c_str());
  return kExitOk;
}

}  // namespace vitkd
