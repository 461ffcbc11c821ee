#pragma once
// Internal to config/: model.preset applied to the parsed TOML table.
#include <toml++/toml.h>

#include <set>
#include <string>

#include "config/config.hpp"

namespace vitkd {

/// Writes model.preset's shape into the model keys of `tbl` by the order of
/// the sources (file < command line; `on_command_line`: the model keys --set
/// names; within one source a shape key beats the preset). Returns which model
/// keys came from where when sources mix ("" when they do not). UserError for
/// an unknown preset (one line, `origin` named).
std::string apply_model_preset(toml::table& tbl, const std::string& origin, const std::set<std::string>& on_command_line);

}  // namespace vitkd
