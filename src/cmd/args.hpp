#pragma once
// vitkd's command line: one parser for every subcommand, driven by tables.
//
// Each subcommand ("train", "export", "prepare synthetic", "bench gemm", ...)
// is a Command: its named positional arguments and a table of --flags, each
// with a kind (which values it accepts), a default, whether it is required and
// a line of help. parse() checks all arguments against the table before the
// command does anything, so nothing is written when they are wrong;
// help_text() prints the same table, so help and parser cannot drift.
//
// CLI11 (libcli11-dev) splits and matches the words; the checks and the
// messages are this table's. Accepted forms: `--name VALUE`, `--name=VALUE`,
// `--switch`, and `-h`/`--help` anywhere (then nothing else is checked). A
// value that looks like an option ("--batch", "-x") counts as missing
// ("--out --batch 4" is an error, not an output named "--batch"); a dash and a
// digit is a value ("--train -5" is a negative count, refused as such).
// Every mistake is one UserError line naming the subcommand, the flag and the
// fix, e.g.
//   export: unknown option '--ot' (did you mean '--out'?); run 'vitkd export --help'
//   bench gemm: --threads must be an integer >= 1, got 'x'
//   prepare synthetic: --train needs a value (N); run 'vitkd prepare synthetic --help'
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vitkd {
namespace cli {

/// Which values a flag accepts.
enum class Kind {
  Text,     ///< any text (may be empty)
  Path,     ///< a file or directory name: non-empty text
  Integer,  ///< a whole number, within [min, max]
  Count,    ///< a whole number >= 0 (and >= min, <= max)
  Number,   ///< a decimal number, within [min, max] (or [min, max) when max_open)
  Switch,   ///< no value: present or not
};

/// One --flag of a subcommand. Built with the helpers below, e.g.
///   Flag::count("train", "N", "training samples").at_least(1).default_to("2048")
struct Flag {
  std::string name;     ///< without the leading "--"
  Kind kind = Kind::Text;
  std::string metavar;  ///< the value's placeholder in usage and help: FILE.h5, N, ...
  std::string help;     ///< one line: what it sets
  std::string def;      ///< default, as text ("" = none)
  bool required = false;
  bool repeatable = false;  ///< may be given several times; Args::all() returns every value
  double min = -1e300, max = 1e300;
  bool max_open = false;                 ///< Number: max itself is excluded
  std::vector<std::string> choices;      ///< when not empty, the only accepted values

  static Flag text(std::string name, std::string metavar, std::string help);
  static Flag path(std::string name, std::string metavar, std::string help);
  static Flag integer(std::string name, std::string metavar, std::string help);
  static Flag count(std::string name, std::string metavar, std::string help);
  static Flag number(std::string name, std::string metavar, std::string help);
  static Flag on_off(std::string name, std::string help);

  Flag& default_to(std::string v) { def = std::move(v); return *this; }
  Flag& needed() { required = true; return *this; }
  Flag& many() { repeatable = true; return *this; }
  Flag& at_least(double v) { min = v; return *this; }
  Flag& at_most(double v) { max = v; return *this; }
  Flag& below(double v) { max = v; max_open = true; return *this; }
  Flag& one_of(std::vector<std::string> v) { choices = std::move(v); return *this; }

  /// The accepted values in words, as help and errors print them:
  /// "an integer >= 1", "a number in [0, 1)", "1 or 3", "a path".
  std::string accepts() const;
};

/// A named positional argument (e.g. CHECKPOINT.h5). Optional ones come last.
struct Positional {
  std::string name;
  std::string help;
  bool required = true;
};

/// One subcommand's table.
struct Command {
  std::string name;     ///< as typed after `vitkd`: "export", "prepare synthetic"
  std::string summary;  ///< one line: what it does
  std::vector<Positional> positionals;
  std::vector<Flag> flags;
  std::string notes;    ///< optional paragraph at the end of --help
};

/// The parsed, checked arguments of one subcommand. Values not given on the
/// command line read as the table's default. Asking for a name that is not in
/// the table, or with the wrong kind, is a programming error (std::logic_error).
class Args {
 public:
  /// -h or --help was given: print help_text() and do nothing else.
  bool help() const { return help_; }
  /// The positional argument `name` ("" for an optional one not given).
  const std::string& positional(const std::string& name) const;
  /// Whether --name was given on the command line.
  bool given(const std::string& name) const;
  /// The value of a Text or Path flag (the last one for a repeatable flag).
  std::string text(const std::string& name) const;
  int64_t integer(const std::string& name) const;  ///< Integer or Count
  double number(const std::string& name) const;    ///< Number
  bool on(const std::string& name) const;          ///< Switch
  /// Every value given for a repeatable flag, in order.
  std::vector<std::string> all(const std::string& name) const;

 private:
  friend Args parse(const Command& cmd, const std::vector<std::string>& args);
  const Flag& flag(const std::string& name, bool (*kind_ok)(Kind)) const;
  std::string value_or_default(const Flag& f) const;
  const Command* cmd_ = nullptr;
  bool help_ = false;
  std::map<std::string, std::string> positionals_;
  std::map<std::string, std::vector<std::string>> values_;
};

/// Checks `args` (the words after the subcommand's name) against `cmd`.
/// Throws UserError (one line) on the first mistake.
Args parse(const Command& cmd, const std::vector<std::string>& args);

/// `vitkd <name> --help`: usage line, summary, arguments and every flag with
/// what it accepts and its default.
std::string help_text(const Command& cmd);

/// One line: "vitkd export CHECKPOINT.h5 --out DIR [--data FILE.h5] [--batch N]"
/// (optional flags as "[options]" when there are more than three).
std::string usage_line(const Command& cmd);

// ---- vitkd's subcommands -------------------------------------------------

/// Every subcommand's table, in the order `vitkd --help` lists them.
const std::vector<Command>& commands();
/// A bound or default as typed: "4096", "0.1".
std::string num(double v);
/// Builds the table commands() returns (command_table.cpp).
std::vector<Command> make_commands();
/// The table of one subcommand, e.g. "export" or "prepare synthetic".
const Command& command(const std::string& name);

/// For a command with kinds (`prepare KIND ...`, `bench KIND ...`): the table
/// of the kind named by args[0]. Returns nullptr when args[0] is -h/--help
/// (then print group_help(group)). Missing or unknown kind: UserError.
const Command* pick_kind(const std::string& group, const std::vector<std::string>& args);
/// `vitkd prepare --help`: every kind's usage line and summary.
std::string group_help(const std::string& group);

/// `vitkd --help`: every command's usage line and summary, launch and exit codes.
std::string main_help();

/// Prints `text` on rank 0 (stdout) and returns kExitOk: the end of every --help.
int print_help(const std::string& text);

/// docs/commands.md (`vitkd help --markdown`): every command's usage, arguments
/// and options, from the tables above (cmd/markdown.cpp).
std::string commands_markdown();
/// docs/configuration.md (`vitkd keys --markdown`): every configuration key.
std::string keys_markdown();

}  // namespace cli
}  // namespace vitkd
