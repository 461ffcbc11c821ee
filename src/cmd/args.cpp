#include "cmd/args.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "comm/world.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace vitkd {
namespace cli {

// ---- flags -------------------------------------------------------------------

namespace {
Flag make(std::string name, Kind kind, std::string metavar, std::string help) {
  Flag f;
  f.name = std::move(name);
  f.kind = kind;
  f.metavar = std::move(metavar);
  f.help = std::move(help);
  return f;
}

bool is_int_kind(Kind k) { return k == Kind::Integer || k == Kind::Count; }
bool is_number_kind(Kind k) { return k == Kind::Number; }
bool is_text_kind(Kind k) { return k == Kind::Text || k == Kind::Path; }
bool is_switch_kind(Kind k) { return k == Kind::Switch; }

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string or_list(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
  return s;
}

std::string see_help(const Command& cmd) { return "; run 'vitkd " + cmd.name + " --help'"; }

// Whole-string integer; false on anything else (spaces, trailing text, overflow).
bool to_int(const std::string& v, long long& out) {
  if (v.empty() || std::isspace(static_cast<unsigned char>(v[0]))) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(v.c_str(), &end, 10);
  return errno == 0 && end != v.c_str() && *end == '\0';
}

bool to_double(const std::string& v, double& out) {
  if (v.empty() || std::isspace(static_cast<unsigned char>(v[0]))) return false;
  char* end = nullptr;
  out = std::strtod(v.c_str(), &end);
  return end != v.c_str() && *end == '\0' && std::isfinite(out);
}

// Whether `v` is a value `f` accepts.
bool accepted(const Flag& f, const std::string& v) {
  switch (f.kind) {
    case Kind::Text: return true;
    case Kind::Path: return !v.empty();
    case Kind::Switch: return true;
    case Kind::Integer:
    case Kind::Count: {
      long long x = 0;
      if (!to_int(v, x) || x < f.min || x > f.max) return false;
      if (f.choices.empty()) return true;
      for (const auto& c : f.choices) {
        long long y = 0;
        if (to_int(c, y) && y == x) return true;
      }
      return false;
    }
    case Kind::Number: {
      double x = 0;
      return to_double(v, x) && x >= f.min && (f.max_open ? x < f.max : x <= f.max);
    }
  }
  return false;
}
}  // namespace

Flag Flag::text(std::string n, std::string m, std::string h) { return make(std::move(n), Kind::Text, std::move(m), std::move(h)); }
Flag Flag::path(std::string n, std::string m, std::string h) { return make(std::move(n), Kind::Path, std::move(m), std::move(h)); }
Flag Flag::integer(std::string n, std::string m, std::string h) { return make(std::move(n), Kind::Integer, std::move(m), std::move(h)); }
Flag Flag::count(std::string n, std::string m, std::string h) {
  Flag f = make(std::move(n), Kind::Count, std::move(m), std::move(h));
  f.min = 0;
  return f;
}
Flag Flag::number(std::string n, std::string m, std::string h) { return make(std::move(n), Kind::Number, std::move(m), std::move(h)); }
Flag Flag::on_off(std::string n, std::string h) { return make(std::move(n), Kind::Switch, "", std::move(h)); }

std::string Flag::accepts() const {
  const bool lo = min > -1e299, hi = max < 1e299;
  switch (kind) {
    case Kind::Text: return "any text";
    case Kind::Path: return "a non-empty path";
    case Kind::Switch: return "no value";
    case Kind::Integer:
    case Kind::Count:
      if (!choices.empty()) return or_list(choices);
      if (lo && hi) return "an integer in [" + num(min) + ", " + num(max) + "]";
      if (lo) return "an integer >= " + num(min);
      if (hi) return "an integer <= " + num(max);
      return "an integer";
    case Kind::Number:
      if (lo && hi) return "a number in [" + num(min) + ", " + num(max) + (max_open ? ")" : "]");
      if (lo) return "a number >= " + num(min);
      if (hi) return std::string("a number ") + (max_open ? "< " : "<= ") + num(max);
      return "a number";
  }
  return "";
}

// ---- parsing -----------------------------------------------------------------

// CLI11 splits and matches the words (--name VALUE, --name=VALUE, positionals,
// -h/--help anywhere); the checks and the messages are vitkd's, from the table.
// Every flag takes zero or one value and collects every occurrence, so that a
// missing value, a repeat and a bad value are each named here, in the order
// the user typed them.
namespace {
const char kNoValue[] = "\x01";  // what a flag given without its value collects

std::string unknown_word(const Command& cmd, const std::string& w) {
  if (w.size() < 2 || w[0] != '-') return "unexpected argument '" + w + "'" + see_help(cmd);
  std::vector<std::string> names;
  for (const auto& c : cmd.flags) names.push_back(c.name);
  const std::string typed = starts_with(w, "--") ? w.substr(0, w.find('=')) : w;
  const size_t start = typed.find_first_not_of('-');
  const std::string bare = start == std::string::npos ? "" : typed.substr(start);
  const std::string n = bare.empty() ? "" : nearest(bare, names);
  return "unknown option '" + typed + "'" + (n.empty() ? "" : " (did you mean '--" + n + "'?)") + see_help(cmd);
}
}  // namespace

std::string num(double v) {
  char b[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) std::snprintf(b, sizeof b, "%.0f", v);
  else std::snprintf(b, sizeof b, "%g", v);
  return b;
}

Args parse(const Command& cmd, const std::vector<std::string>& args) {
  Args a;
  a.cmd_ = &cmd;
  auto fail = [&](const std::string& what) { throw UserError(cmd.name + ": " + what); };
  CLI::App app(cmd.summary, cmd.name);
  app.allow_extras(true);
  app.set_help_flag("-h,--help");
  std::map<const CLI::Option*, const Flag*> flag_of;
  for (const auto& f : cmd.flags) {
    auto& slot = a.values_[f.name];
    CLI::Option* o = f.kind == Kind::Switch
        ? app.add_flag("--" + f.name + "{" + kNoValue + "}", slot)
        : app.add_option("--" + f.name, slot)->expected(0, 1)->allow_extra_args(false)->default_str(kNoValue);
    o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    flag_of[o] = &f;
  }
  for (const auto& p : cmd.positionals) app.add_option(p.name, a.positionals_[p.name]);
  std::vector<std::string> words(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(words);
  } catch (const CLI::CallForHelp&) {
    a.help_ = true;
    return a;
  } catch (const CLI::ParseError& e) {
    fail(std::string("cannot read the arguments (") + e.what() + ")" + see_help(cmd));
  }
  for (const auto& w : app.remaining()) fail(unknown_word(cmd, w));
  std::map<const Flag*, size_t> seen;
  for (const CLI::Option* o : app.parse_order()) {
    auto it = flag_of.find(o);
    if (it == flag_of.end()) continue;  // a positional
    const Flag& f = *it->second;
    const auto& given = a.values_[f.name];
    const size_t k = seen[&f]++;
    const std::string& value = given.at(k);
    if (f.kind == Kind::Switch && value != kNoValue)
      fail("--" + f.name + " takes no value, got '" + value + "'" + see_help(cmd));
    if (f.kind != Kind::Switch && value == kNoValue)
      fail("--" + f.name + " needs a value (" + f.metavar + ")" + see_help(cmd));
    if (k > 0 && !f.repeatable)
      fail("--" + f.name + " is given twice ('" + given[0] + "' and '" + value + "'); give it once");
    if (!accepted(f, value)) fail("--" + f.name + " must be " + f.accepts() + ", got '" + value + "'");
  }
  for (auto it = a.values_.begin(); it != a.values_.end();)
    it = it->second.empty() ? a.values_.erase(it) : std::next(it);
  for (const auto& p : cmd.positionals)
    if (p.required && app.count(p.name) == 0)
      fail("missing " + p.name + " (" + p.help + ")" + see_help(cmd));
  for (const auto& f : cmd.flags)
    if (f.required && !a.values_.count(f.name))
      fail("--" + f.name + " " + f.metavar + " (" + f.help + ") is required" + see_help(cmd));
  return a;
}

const Flag& Args::flag(const std::string& name, bool (*kind_ok)(Kind)) const {
  for (const auto& f : cmd_->flags)
    if (f.name == name) {
      if (!kind_ok(f.kind))
        throw std::logic_error(cmd_->name + ": flag --" + name + " read as the wrong kind");
      return f;
    }
  throw std::logic_error(cmd_->name + ": no flag --" + name + " in the table");
}

std::string Args::value_or_default(const Flag& f) const {
  auto it = values_.find(f.name);
  return it == values_.end() ? f.def : it->second.back();
}

const std::string& Args::positional(const std::string& name) const {
  static const std::string none;
  for (const auto& p : cmd_->positionals)
    if (p.name == name) {
      auto it = positionals_.find(name);
      return it == positionals_.end() ? none : it->second;
    }
  throw std::logic_error(cmd_->name + ": no positional argument " + name + " in the table");
}

bool Args::given(const std::string& name) const {
  flag(name, [](Kind) { return true; });
  return values_.count(name) > 0;
}

std::string Args::text(const std::string& name) const {
  return value_or_default(flag(name, is_text_kind));
}

int64_t Args::integer(const std::string& name) const {
  const Flag& f = flag(name, is_int_kind);
  long long v = 0;
  if (!to_int(value_or_default(f), v))
    throw std::logic_error(cmd_->name + ": --" + name + " has no value and no integer default");
  return v;
}

double Args::number(const std::string& name) const {
  const Flag& f = flag(name, is_number_kind);
  double v = 0;
  if (!to_double(value_or_default(f), v))
    throw std::logic_error(cmd_->name + ": --" + name + " has no value and no numeric default");
  return v;
}

bool Args::on(const std::string& name) const { return values_.count(flag(name, is_switch_kind).name) > 0; }

std::vector<std::string> Args::all(const std::string& name) const {
  flag(name, [](Kind) { return true; });
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

// ---- help --------------------------------------------------------------------

namespace {
std::string flag_usage(const Flag& f) {
  return "--" + f.name + (f.metavar.empty() ? "" : " " + f.metavar);
}

// "  LEFT                    RIGHT\n", RIGHT on its own line when LEFT is long.
std::string row(const std::string& left, const std::string& right) {
  constexpr size_t kCol = 26;
  std::string s = "  " + left;
  if (s.size() + 1 > kCol) s += "\n" + std::string(kCol, ' ');
  else s += std::string(kCol - s.size(), ' ');
  return s + right + "\n";
}
}  // namespace

std::string usage_line(const Command& cmd) {
  std::string s = "vitkd " + cmd.name;
  for (const auto& p : cmd.positionals) s += p.required ? " " + p.name : " [" + p.name + "]";
  size_t optional = 0;
  for (const auto& f : cmd.flags) {
    if (f.required) s += " " + flag_usage(f);
    else ++optional;
  }
  if (optional > 3) return s + " [options]";
  for (const auto& f : cmd.flags)
    if (!f.required) s += " [" + flag_usage(f) + (f.repeatable ? " ..." : "") + "]";
  return s;
}

std::string help_text(const Command& cmd) {
  std::string s = "usage: " + usage_line(cmd) + "\n" + cmd.summary + "\n";
  if (!cmd.positionals.empty()) {
    s += "\narguments:\n";
    for (const auto& p : cmd.positionals) s += row(p.name, p.help + (p.required ? "" : " (optional)"));
  }
  s += "\noptions:\n";
  for (const auto& f : cmd.flags) {
    std::string h = f.help;
    if (f.required) h += "; required";
    if (f.kind != Kind::Text && f.kind != Kind::Path && f.kind != Kind::Switch) h += "; " + f.accepts();
    if (!f.def.empty()) h += "; default " + f.def;
    if (f.repeatable) h += "; repeatable";
    s += row(flag_usage(f), h);
  }
  s += row("-h, --help", "print this help");
  if (!cmd.notes.empty()) s += "\n" + cmd.notes + "\n";
  return s;
}

// ---- vitkd's subcommands -------------------------------------------------------

namespace {
struct Group {
  const char* name;
  const char* what;  // what the second word names
};
const Group kGroups[] = {{"prepare", "dataset kind"}, {"bench", "benchmark"}};

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> all = make_commands();
  return all;
}

const Command& command(const std::string& name) {
  for (const auto& c : commands())
    if (c.name == name) return c;
  throw std::logic_error("no command table named '" + name + "'");
}

const Command* pick_kind(const std::string& group, const std::vector<std::string>& args) {
  std::string what = "kind";
  for (const auto& g : kGroups)
    if (group == g.name) what = g.what;
  std::vector<std::string> kinds;
  for (const auto& c : commands())
    if (starts_with(c.name, (group + " ").c_str())) kinds.push_back(c.name.substr(group.size() + 1));
  const std::string run_help = "; run 'vitkd " + group + " --help'";
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) return nullptr;
  if (args.empty() || starts_with(args[0], "-"))
    throw UserError(group + ": missing the " + what + " (" + or_list(kinds) + ")" +
                    (args.empty() ? "" : " before '" + args[0] + "'") + run_help);
  for (const auto& k : kinds)
    if (args[0] == k) return &command(group + " " + k);
  const std::string n = nearest(args[0], kinds);
  throw UserError(group + ": unknown " + what + " '" + args[0] + "'" +
                  (n.empty() ? "" : " (did you mean '" + n + "'?)") + "; expected " + or_list(kinds) +
                  run_help);
}

std::string group_help(const std::string& group) {
  std::string s = "usage:\n";
  for (const auto& c : commands())
    if (starts_with(c.name, (group + " ").c_str())) s += "  " + usage_line(c) + "\n      " + c.summary + "\n";
  return s + "Run 'vitkd " + group + " KIND --help' for the options of one.\n";
}

std::string main_help() {
  std::string s =
      "usage: vitkd COMMAND [ARGS]        ('vitkd COMMAND --help' lists a command's options)\n"
      "vitkd distills a large Vision Transformer into a small one, data-parallel over MPI ranks.\n\n"
      "commands:\n";
  for (const auto& c : commands()) s += "  " + usage_line(c).substr(6) + "\n      " + c.summary + "\n";
  s += "  --version, -h, --help\n\n"
       "Launch with mpirun or srun for several ranks. Exit codes: 0 ok, 1 runtime failure,\n"
       "2 user error (usage, configuration, data), 75 preempted after a checkpoint.\n";
  return s;
}

int print_help(const std::string& text) {
  if (world().root()) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace vitkd
