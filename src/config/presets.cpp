// model.preset: timm's ViT shapes, and how a preset fills the model keys
// (the order of the configuration's sources: the file, then the command line).
#include "config/presets.hpp"

#include <algorithm>

#include "util/error.hpp"
#include "util/strings.hpp"

namespace vitkd {

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"vit_ti16", "vit_tiny_patch16_224", 192, 12, 3},
      {"vit_s16", "vit_small_patch16_224", 384, 12, 6},
      {"vit_b16", "vit_base_patch16_224", 768, 12, 12},
      {"vit_l16", "vit_large_patch16_224", 1024, 24, 16},
  };
  return presets;
}

// The configuration's sources in order, the file and then the command line
// (`on_command_line`: the model keys --set names): a later source beats an
// earlier one, and within one source a shape key beats the preset. So
// model.preset writes its shape into the model keys the file leaves unset,
// or, named on the command line, into every model key the command line does
// not set. Returns which model keys came from where when sources mix ("" when
// they do not). A model.preset that is not a string is left to the type check.
std::string apply_model_preset(toml::table& tbl, const std::string& origin,
                               const std::set<std::string>& on_command_line) {
  const auto* name = tbl.at_path("model.preset").as_string();
  if (!name || name->get().empty()) return "";
  const auto& all = model_presets();
  const auto it = std::find_if(all.begin(), all.end(), [&](const ModelPreset& p) { return name->get() == p.name; });
  if (it == all.end()) {
    std::vector<std::string> names;
    std::string list;
    for (const auto& p : all) {
      names.emplace_back(p.name);
      list += (list.empty() ? "\"" : ", \"") + names.back() + "\"";
    }
    throw UserError(origin + ": invalid value for 'model.preset': \"" + name->get() + "\" is not one of " + list +
                    " (or \"\")" + did_you_mean(name->get(), names));
  }
  auto* model = tbl["model"].as_table();
  const bool preset_on_command_line = on_command_line.count("preset") > 0;
  std::vector<std::string> from_file, from_command_line, over_file;
  auto fill = [&](const char* key, auto value) {
    if (on_command_line.count(key)) {
      from_command_line.emplace_back(key);
    } else if (!model->contains(key)) {
      model->insert(key, value);
    } else if (preset_on_command_line) {
      model->insert_or_assign(key, value);
      over_file.emplace_back(key);
    } else {
      from_file.emplace_back(key);
    }
  };
  fill("image_size", int64_t{224});
  fill("channels", int64_t{3});
  fill("patch", int64_t{16});
  fill("dim", it->dim);
  fill("depth", it->depth);
  fill("heads", it->heads);
  fill("mlp_ratio", 4.0);
  fill("norm_eps", 1e-6);
  auto joined = [](const std::vector<std::string>& keys) {
    std::string s;
    for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k;
    return s;
  };
  std::string what = "model.preset \"" + name->get() + "\" (" + (preset_on_command_line ? "command line" : origin) + ")";
  if (!over_file.empty()) what += " over " + origin + "'s " + joined(over_file);
  if (!from_file.empty()) what += "; " + joined(from_file) + " from " + origin;
  if (!from_command_line.empty()) what += "; " + joined(from_command_line) + " from the command line";
  return over_file.empty() && from_file.empty() && from_command_line.empty() ? "" : what;
}

}  // namespace vitkd
