#include "config/config.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>

#include "config/presets.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace vitkd {
namespace {

// A choice (config/choices.hpp) is written as one of its words.
template <class T> const char* type_name() {
  static_assert(is_choice<T>::value, "a configuration type without a name");
  return "string";
}
template <> const char* type_name<std::string>() { return "string"; }
template <> const char* type_name<int64_t>() { return "integer"; }
template <> const char* type_name<double>() { return "float"; }
template <> const char* type_name<bool>() { return "bool"; }
template <> const char* type_name<std::vector<double>>() { return "array of floats"; }
template <> const char* type_name<PathList>() { return "string or array of strings"; }
template <> const char* type_name<ResumeFrom>() { return "string"; }

// A TOML basic string with escapes. (toml++ 3.3 prints a string holding a
// newline as a multi-line literal string, and TOML drops a newline right
// after the opening quotes, so a value starting with one did not survive the
// echo; found by fuzz_config.)
std::string to_toml(const std::string& v) {
  std::string o = "\"";
  for (const char ch : v) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04X", c);
          o += b;
        } else {
          o += ch;  // UTF-8 passes through (TOML text and --set values are checked)
        }
    }
  }
  return o + "\"";
}
std::string to_toml(int64_t v) { return std::to_string(v); }
std::string to_toml(bool v) { return v ? "true" : "false"; }
std::string to_toml(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  std::string s = o.str();
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}
std::string to_toml(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + to_toml(v[i]);
  return s + "]";
}

template <class E, std::enable_if_t<is_choice<E>::value, int> = 0> std::string to_toml(E v) {
  return to_toml(std::string(choice_name(v)));
}
std::string to_toml(const ResumeFrom& r) {
  return to_toml(r.kind == ResumeKind::Path ? r.path : std::string(choice_name(r.kind)));
}

// One path as a string (also none: ""), several as an array.
std::string to_toml(const PathList& v) {
  if (v.size() <= 1) return to_toml(v.empty() ? std::string() : v[0]);
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + to_toml(v[i]);
  return s + "]";
}

// Reads one node into `out`; returns false on a type mismatch.
bool read_node(const toml::node& n, std::string& out) {
  if (auto v = n.value_exact<std::string>()) { out = *v; return true; }
  return false;
}
bool read_node(const toml::node& n, int64_t& out) {
  if (auto v = n.value_exact<int64_t>()) { out = *v; return true; }
  return false;
}
bool read_node(const toml::node& n, double& out) {
  if (auto v = n.value_exact<double>()) { out = *v; return true; }
  if (auto v = n.value_exact<int64_t>()) { out = double(*v); return true; }  // 1 means 1.0
  return false;
}
bool read_node(const toml::node& n, bool& out) {
  if (auto v = n.value_exact<bool>()) { out = *v; return true; }
  return false;
}
bool read_node(const toml::node& n, std::vector<double>& out) {
  const toml::array* a = n.as_array();
  if (!a) return false;
  std::vector<double> v(a->size());
  for (size_t i = 0; i < a->size(); ++i)
    if (!read_node(*a->get(i), v[i])) return false;
  out = std::move(v);
  return true;
}

bool read_node(const toml::node& n, PathList& out) {
  PathList v;
  if (auto s = n.value_exact<std::string>()) {
    if (!s->empty()) v.paths.push_back(*s);
  } else if (const toml::array* a = n.as_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      auto e = a->get(i)->value_exact<std::string>();
      if (!e || e->empty()) return false;
      v.paths.push_back(*e);
    }
  } else {
    return false;
  }
  out = std::move(v);
  return true;
}

// A choice: one of its words (parse_config names a word that is none).
template <class E, std::enable_if_t<is_choice<E>::value, int> = 0> bool read_node(const toml::node& n, E& out) {
  auto w = n.value_exact<std::string>();
  if (!w) return false;
  auto v = parse_choice<E>(*w);
  if (v) out = *v;
  return bool(v);
}
// checkpoint.resume: a choice's word or, any other string, a path.
bool read_node(const toml::node& n, ResumeFrom& out) {
  auto w = n.value_exact<std::string>();
  if (!w) return false;
  auto k = parse_choice<ResumeKind>(*w);
  out = k ? ResumeFrom{*k, ""} : ResumeFrom{ResumeKind::Path, *w};
  return true;
}

// Calls f(section, key, field) for every field of the table.
template <class C, class F> void visit(C& cfg, F&& f) {
#define VITKD_CFG_VISIT(section, key, type, def, help) f(#section, #key, cfg.section##_##key);
  VITKD_CONFIG_TABLE(VITKD_CFG_VISIT)
#undef VITKD_CFG_VISIT
}

std::vector<std::string> all_names() {
  std::vector<std::string> names;
  for (const auto& k : config_keys()) names.push_back(k.name);
  return names;
}

// True if `s` is well-formed UTF-8 (what TOML requires of every string).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    // No overlong forms, surrogates or code points past U+10FFFF.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return false;
    i += len;
  }
  return true;
}

// "a string", "an integer", "an array".
std::string with_article(const std::string& w) {
  return (!w.empty() && std::string("aeiou").find(w[0]) != std::string::npos ? "an " : "a ") + w;
}

}  // namespace

const std::vector<ConfigKeyInfo>& config_keys() {
  static const std::vector<ConfigKeyInfo> keys = [] {
    std::vector<ConfigKeyInfo> k;
    Config d;
    std::vector<std::string> helps;
#define VITKD_CFG_HELP(section, key, type, def, help) helps.push_back(help);
    VITKD_CONFIG_TABLE(VITKD_CFG_HELP)
#undef VITKD_CFG_HELP
    size_t i = 0;
    visit(d, [&](const char* s, const char* key, auto& field) {
      using T = std::decay_t<decltype(field)>;
      k.push_back({std::string(s) + "." + key, type_name<T>(), to_toml(field), helps[i++]});
    });
    return k;
  }();
  return keys;
}


Config parse_config(const std::string& toml_text, const std::string& origin,
                    const std::vector<std::string>& overrides) {
  toml::table tbl;
  try {
    tbl = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw UserError(origin + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) +
                    ": invalid TOML: " + std::string(e.description()) +
                    "; fix the syntax (see inputs/*.toml for examples)");
  }

  // Apply overrides into the table first, so that one code path checks them.
  std::set<std::string> model_on_command_line;  // model keys --set names (apply_model_preset)
  for (const auto& ov : overrides) {
    auto eq = ov.find('=');
    auto dot = ov.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq)
      throw UserError("--set '" + ov + "': expected section.key=value, e.g. --set optim.lr=5e-4");
    std::string section = ov.substr(0, dot), key = ov.substr(dot + 1, eq - dot - 1);
    std::string value = ov.substr(eq + 1);
    toml::table parsed;
    try {
      parsed = toml::parse("v = " + value);
    } catch (const toml::parse_error&) {
      // A bare word is a string; it must be UTF-8 like any TOML string, or
      // the configuration echo (log, checkpoint) would not parse back.
      if (!valid_utf8(value))
        throw UserError("--set '" + ov + "': the value is not valid UTF-8; quote it as a TOML string");
      parsed = toml::table{{"v", value}};
    }
    if (!tbl.contains(section)) tbl.insert(section, toml::table{});
    auto* sec = tbl[section].as_table();
    if (!sec)
      throw UserError("--set '" + ov + "': '" + section + "' is not a section" +
                      did_you_mean(section + "." + key, all_names()));
    sec->insert_or_assign(key, *parsed["v"].node());
    if (section == "model") model_on_command_line.insert(key);
  }

  // Unknown sections and keys are fatal.
  const auto names = all_names();
  std::set<std::string> known(names.begin(), names.end());
  for (auto& [sk, sv] : tbl) {
    std::string section(sk.str());
    auto* sec = sv.as_table();
    if (!sec) {
      std::ostringstream got;
      got << sv.type();
      // A known section written as a value or an array of tables needs no
      // suggestion; anything else gets the nearest key.
      const bool is_section = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
        return n.compare(0, section.size() + 1, section + ".") == 0;
      });
      throw UserError(origin + ": top-level key '" + section + "' must be a [section], got " +
                      with_article(got.str()) +
                      (is_section ? "; write it as [" + section + "]" : did_you_mean(section, names)));
    }
    for (auto& [kk, kv] : *sec) {
      std::string full = section + "." + std::string(kk.str());
      if (!known.count(full))
        throw UserError(origin + ": unknown configuration key '" + full + "'" +
                        did_you_mean(full, names) + "; run `vitkd keys` for the list");
    }
  }

  const std::string model_sources = apply_model_preset(tbl, origin, model_on_command_line);
  Config cfg;
  cfg.model_sources = model_sources;
  visit(cfg, [&](const char* s, const char* k, auto& field) {
    const toml::node* n = tbl.at_path(std::string(s) + "." + k).node();
    if (!n) return;
    using T = std::decay_t<decltype(field)>;
    if (!read_node(*n, field)) {
      if constexpr (is_choice<T>::value) {
        if (auto w = n->value_exact<std::string>())
          throw UserError(origin + ": invalid value for '" + s + "." + k + "': \"" + *w + "\" is not one of " +
                          choice_list<T>() + did_you_mean(*w, choice_words<T>()));
      }
      std::ostringstream got;
      got << n->type();
      if (n->is_array())
        got << (std::is_same_v<T, PathList> ? " with an element that is not a non-empty string"
                                             : " with an element that is not a number");
      throw UserError(origin + ": key '" + std::string(s) + "." + k + "' must be " +
                      with_article(type_name<T>()) + ", got " + with_article(got.str()) +
                      "; e.g. " + std::string(s) + "." + k + " = " + to_toml(field));
    }
  });
  validate_config(cfg, origin);
  return cfg;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in)
    throw UserError("cannot read configuration file '" + path +
                    "'; check the path (examples are in inputs/)");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path, overrides);
}

namespace {

// The keys of the training views (data.crop_*, erasing, mixing): `bad` throws.
void validate_views(const Config& c, const std::function<void(const std::string&, const std::string&)>& bad) {
  auto range = [&](const char* key, const std::vector<double>& r, double hi, const char* domain) {
    if (r.size() != 2 || !(r[0] > 0 && r[0] <= r[1] && r[1] <= hi))
      bad(key, "must be two numbers [min, max] with 0 < min <= max" + std::string(hi < 1e300 ? " <= 1" : "") +
                   " (" + domain + "), got " + to_toml(r));
  };
  range("data.crop_scale", c.data_crop_scale, 1.0, "area fractions, e.g. [0.08, 1.0]");
  range("data.crop_ratio", c.data_crop_ratio, 1e300, "width / height, e.g. [0.75, 1.3333]");
  if (!(c.data_crop_pct > 0 && c.data_crop_pct <= 1))
    bad("data.crop_pct", "must be in (0, 1] (0.875 is timm's; 1 = the whole shorter side), got " +
                             to_toml(c.data_crop_pct));
  auto prob = [&](const char* key, double v) {
    if (!(v >= 0 && v <= 1)) bad(key, "is a probability and must lie in [0, 1], got " + to_toml(v));
  };
  prob("data.random_erase", c.data_random_erase);
  prob("data.mixup_prob", c.data_mixup_prob);
  prob("data.mixup_switch_prob", c.data_mixup_switch_prob);
  for (const auto& [key, alpha] : {std::pair<const char*, double>{"data.mixup", c.data_mixup}, {"data.cutmix", c.data_cutmix}})
    if (!(alpha >= 0 && alpha <= 1e3))
      bad(key, std::string("is the alpha of Beta(alpha, alpha) and must lie in [0, 1000] (0 = off; 0.8 and 1.0 are "
                           "DeiT's), got ") + to_toml(alpha));
  const bool policy = c.data_policy != Policy::None;
  if ((c.data_mixup > 0 || c.data_cutmix > 0 || c.data_random_erase > 0 || policy) && !c.data_augment)
    bad(c.data_mixup > 0 ? "data.mixup" : c.data_cutmix > 0 ? "data.cutmix" : policy ? "data.policy" : "data.random_erase",
        "the policy, random erasing, Mixup and CutMix are training augmentations and need data.augment = true; set "
        "it, or set data.policy = \"none\" and data.mixup = data.cutmix = data.random_erase = 0");
}

}  // namespace

void validate_config(const Config& c, const std::string& origin) {
  auto bad = [&](const std::string& key, const std::string& what) {
    throw UserError(origin + ": invalid value for '" + key + "': " + what);
  };
  // The bf16 wire type is the sharded reduce-scatter's; the unsharded baseline
  // allreduces fp32 gradients, so the pair would silently mean fp32.
  if (c.precision_reduce == Precision::Bf16 && c.dist_sharding == Sharding::None)
    bad("precision.reduce", "\"" + std::string(choice_name(Precision::Bf16)) +
                                "\" is the wire type of the sharded reduce-scatter (" +
                                setting_text("dist.sharding", Sharding::Zero1) + "); " + setting_text("dist.sharding", Sharding::None) +
                                " allreduces fp32 gradients. Set " + setting_text("precision.reduce", Precision::Fp32) +
                                " or " + setting_text("dist.sharding", Sharding::Zero1));
  if (c.sift_enabled && c.sift_scope == SiftScope::Teacher && c.sift_criterion != SiftCriterion::CrossEntropy)
    bad("sift.scope", "\"" + std::string(choice_name(SiftScope::Teacher)) +
                          "\" ranks samples before the teacher runs, so it needs " +
                          setting_text("sift.criterion", SiftCriterion::CrossEntropy) + " (got \"" +
                          choice_name(c.sift_criterion) + "\")");
  if (c.sift_enabled && c.sift_scope == SiftScope::Teacher && c.run_mode != RunMode::Distill)
    bad("sift.scope", "\"" + std::string(choice_name(SiftScope::Teacher)) +
                          "\" selects the samples that get the teacher, so it needs " +
                          setting_text("run.mode", RunMode::Distill) + "; use " + setting_text("sift.scope", SiftScope::Sample) +
                          " in teacher mode");
  if (c.sift_enabled && c.sift_scope == SiftScope::Teacher && c.sift_pass == SiftPass::InForward)
    bad("sift.pass", "\"" + std::string(choice_name(SiftPass::InForward)) + "\" serves " +
                         setting_text("sift.scope", SiftScope::Sample) + "; " +
                         setting_text("sift.scope", SiftScope::Teacher) +
                         " ranks in the training forward already: leave sift.pass at \"" +
                         choice_name(SiftPass::Separate) + "\"");
  if (!(c.train_label_smoothing >= 0 && c.train_label_smoothing < 1))
    bad("train.label_smoothing", "must lie in [0, 1) (0 = off, 0.1 is usual), got " +
                                     std::to_string(c.train_label_smoothing));
  if (!(c.sift_beta >= 0)) bad("sift.beta", "must be >= 0 (0 keeps every sample), got " + std::to_string(c.sift_beta));
  if (c.sift_history < 1) bad("sift.history", "must be at least 1, got " + std::to_string(c.sift_history));
  if (c.sift_delay < 0) bad("sift.delay", "must be >= 0");
  if (!(c.dist_bucket_mb > 0)) bad("dist.bucket_mb", "must be > 0");
  if (c.run_out_dir.empty()) bad("run.out_dir", "must not be empty");
  if (c.data_batch_size < 1) bad("data.batch_size", "must be at least 1, got " + std::to_string(c.data_batch_size));
  if (c.data_crop_pad < 0) bad("data.crop_pad", "must be >= 0");
  validate_views(c, bad);
  if (c.data_prefetch < 1) bad("data.prefetch", "must be at least 1");
  if (c.data_loader_threads < -1 || c.data_loader_threads > 256)
    bad("data.loader_threads", "must be -1 (automatic), 0 (the transform on the compute thread) or a thread count "
                               "up to 256, got " + std::to_string(c.data_loader_threads));
  if (c.model_image_size < 1) bad("model.image_size", "must be at least 1");
  if (c.model_channels < 1) bad("model.channels", "must be at least 1");
  if (c.model_patch < 1) bad("model.patch", "must be at least 1");
  if (c.model_image_size % c.model_patch != 0)
    bad("model.patch", "patch " + std::to_string(c.model_patch) + " does not divide image_size " +
                           std::to_string(c.model_image_size) + "; choose a divisor of the image size");
  if (c.model_dim < 1) bad("model.dim", "must be at least 1");
  if (c.model_depth < 1) bad("model.depth", "must be at least 1, got " + std::to_string(c.model_depth));
  if (c.model_heads < 1) bad("model.heads", "must be at least 1");
  if (c.model_dim % c.model_heads != 0)
    bad("model.heads", std::to_string(c.model_heads) + " heads do not divide dim " +
                           std::to_string(c.model_dim) + "; choose heads so that dim % heads == 0");
  if (!(c.model_mlp_ratio > 0)) bad("model.mlp_ratio", "must be > 0");
  if (c.model_classes < 2) bad("model.classes", "must be at least 2");
  if (!(c.model_norm_eps > 0 && c.model_norm_eps < 1))
    bad("model.norm_eps", "must be in (0, 1), got " + std::to_string(c.model_norm_eps));
  if (!(c.model_drop_path >= 0 && c.model_drop_path < 1))
    bad("model.drop_path", "must lie in [0, 1) (0 = off; timm's ViT-S/B recipes use 0.1), got " +
                               to_toml(c.model_drop_path));
  if (c.run_mode == RunMode::Distill && c.teacher_checkpoint.empty() && c.teacher_torchscript.empty())
    throw UserError(origin + ": " + setting_text("run.mode", RunMode::Distill) + " needs a teacher; set teacher.checkpoint to a vitkd "
                    "checkpoint.h5 or teacher.torchscript to a torch.jit.save file (exactly one)");
  if (c.run_mode == RunMode::Distill && !c.teacher_checkpoint.empty() && !c.teacher_torchscript.empty())
    throw UserError(origin + ": both teacher.checkpoint and teacher.torchscript are set; "
                    "set exactly one of them (the other to \"\")");
  if (!(c.distill_temperature > 0)) bad("distill.temperature", "must be > 0");
  if (!(c.distill_alpha >= 0 && c.distill_alpha <= 1)) bad("distill.alpha", "must be in [0, 1]");
  if (c.train_epochs < 1) bad("train.epochs", "must be at least 1");
  if (c.train_max_steps < 0) bad("train.max_steps", "must be >= 0 (0 = no limit)");
  if (c.train_eval_every_epochs < 0) bad("train.eval_every_epochs", "must be >= 0");
  if (c.train_eval_every_steps < 0) bad("train.eval_every_steps", "must be >= 0 (0 = off)");
  for (const double t : c.train_accuracy_thresholds)
    if (!(t > 0 && t <= 1))
      bad("train.accuracy_thresholds", "every threshold must be in (0, 1] (a test top-1 fraction), got " +
                                           to_toml(t));
  if (c.train_log_every_steps < 1) bad("train.log_every_steps", "must be at least 1");
  if (c.train_timing_every_steps < 1) bad("train.timing_every_steps", "must be at least 1");
  if (!(c.train_mfu_ceiling >= 0)) bad("train.mfu_ceiling", "must be >= 0 (0 = measure)");
  if (c.train_threads < 0) bad("train.threads", "must be >= 0 (0 = automatic)");
  if (!(c.optim_lr > 0)) bad("optim.lr", "must be > 0");
  if (!(c.optim_weight_decay >= 0)) bad("optim.weight_decay", "must be >= 0");
  if (c.optim_warmup_steps < 0) bad("optim.warmup_steps", "must be >= 0");
  if (!(c.optim_min_lr >= 0 && c.optim_min_lr <= c.optim_lr))
    bad("optim.min_lr", "must be in [0, optim.lr], but it is " + fmt("%g", c.optim_min_lr) + " and optim.lr is " +
                            fmt("%g", c.optim_lr) + "; lower optim.min_lr with optim.lr (e.g. optim.min_lr = 0)");
  if (!(c.optim_grad_clip >= 0)) bad("optim.grad_clip", "must be >= 0 (0 = off)");
  if (!(c.optim_beta1 >= 0 && c.optim_beta1 < 1)) bad("optim.beta1", "must be in [0, 1)");
  if (!(c.optim_beta2 >= 0 && c.optim_beta2 < 1)) bad("optim.beta2", "must be in [0, 1)");
  if (!(c.optim_eps > 0)) bad("optim.eps", "must be > 0");
  if (c.distill_cache_epochs < 0) bad("distill.cache_epochs", "must be >= 0 (0 = train.epochs)");
  if (c.distill_cache_top_k < 1) bad("distill.cache_top_k", "must be at least 1");
  if (c.train_max_bad_steps < 1) bad("train.max_bad_steps", "must be at least 1");
  if (c.train_profile_steps < 0)
    bad("train.profile_steps", "must be >= 0 (0 = off), got " + std::to_string(c.train_profile_steps));
  if (c.train_profile_from_step < 1)
    bad("train.profile_from_step", "must be at least 1 (steps count from 1), got " +
                                       std::to_string(c.train_profile_from_step));
  if (c.checkpoint_every_steps < 0) bad("checkpoint.every_steps", "must be >= 0 (0 = only at the end)");
  if (c.checkpoint_keep < 1) bad("checkpoint.keep", "must be at least 1");
  if (c.checkpoint_resume.kind == ResumeKind::Path && c.checkpoint_resume.path.empty())
    bad("checkpoint.resume", "must be " + choice_list<ResumeKind>() + " or the path of a checkpoint.h5");
}

std::string config_to_toml(const Config& cfg) {
  std::ostringstream out;
  std::string current;
  visit(cfg, [&](const char* s, const char* k, const auto& field) {
    if (current != s) {
      out << (current.empty() ? "" : "\n") << "[" << s << "]\n";
      current = s;
    }
    out << k << " = " << to_toml(field) << "\n";
  });
  return out.str();
}

}  // namespace vitkd
