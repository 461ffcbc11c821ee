// `vitkd train` and `vitkd keys`: the configuration's command-line face.
#include <cstdio>
#include <memory>

#include "cmd/args.hpp"
#include "cmd/commands.hpp"
#include "comm/world.hpp"
#include "config/config.hpp"
#include "train/setup.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"
#include "util/test_faults.hpp"

namespace vitkd {

int train_command(const std::vector<std::string>& args) {
  const cli::Command& cmd = cli::command("train");
  const cli::Args a = cli::parse(cmd, args);
  if (a.help()) return cli::print_help(cli::help_text(cmd));
  const std::string& path = a.positional("CONFIG.toml");
  const Config cfg = load_config(path, a.all("set"));
  // A user error that one rank alone finds (collective by default, as most
  // are): tests that its message still reaches the user (util/error.cpp, die).
  if (TestFaults::get().user_error_rank == world().rank)
    throw UserError("VITKD_TEST_USER_ERROR_RANK: rank " + std::to_string(world().rank) +
                    " alone found this user error");
  // Everything checked and built, the narrow specs included; the loop sees no Config.
  const std::unique_ptr<TrainSetup> setup = setup_training(cfg, path);
  return train_main(*setup);
}

int keys_main(const std::vector<std::string>& args) {
  const cli::Command& cmd = cli::command("keys");
  const cli::Args a = cli::parse(cmd, args);
  if (a.help()) return cli::print_help(cli::help_text(cmd));
  if (a.on("markdown")) return cli::print_help(cli::keys_markdown());
  if (world().root())
    for (const auto& k : config_keys())
      std::printf("%-28s %-8s %-16s %s\n", k.name.c_str(), k.type.c_str(), k.def.c_str(),
                  k.help.c_str());
  return kExitOk;
}

}  // namespace vitkd
