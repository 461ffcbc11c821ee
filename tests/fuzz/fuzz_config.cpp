// libFuzzer target: the configuration parser and its validation
// (parse_config: TOML text, --set overrides, unknown-key suggestions, value
// checks). The input is the TOML text, then up to four overrides, separated
// by NUL bytes. Properties: parse_config accepts or throws UserError; an
// accepted configuration's echo (config_to_toml, which goes into the log and
// the checkpoint) parses back to the same configuration.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "util/strings.hpp"
#include "fuzz_common.hpp"

using namespace vitkd;
using namespace vitkd::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < 5) parts.emplace_back();
    else parts.back().push_back(static_cast<char>(data[i]));
  }
  const std::vector<std::string> overrides(parts.begin() + 1, parts.end());
  Config cfg;
  if (!accepts([&] { cfg = parse_config(parts[0], "fuzz.toml", overrides); })) return 0;
  const std::string echo = config_to_toml(cfg);
  Config back;
  if (!accepts([&] { back = parse_config(echo, "echo.toml"); }))
    finding("the echo of an accepted configuration does not parse back");
  if (config_to_toml(back) != echo) finding("the echo does not round-trip");
  // The suggestion helper on the raw text: never crashes, returns a candidate or "".
  std::vector<std::string> names;
  for (const auto& k : config_keys()) names.push_back(k.name);
  const std::string n = nearest(parts[0].substr(0, 64), names);
  if (!n.empty() && std::find(names.begin(), names.end(), n) == names.end())
    finding("nearest() returned a name that is not a candidate");
  return 0;
}
