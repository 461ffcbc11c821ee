// The command-line parser (src/cmd/args.hpp) and vitkd's tables: every
// mistake is one UserError line naming the subcommand, the flag and the fix;
// --help is generated from the same table the parser reads.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "cmd/args.hpp"
#include "data/dataset.hpp"
#include "util/error.hpp"

namespace {

using vitkd::cli::Args;
using vitkd::cli::Command;
using vitkd::cli::Flag;
using vitkd::cli::command;
using vitkd::cli::commands;
using vitkd::cli::parse;

// The message of the UserError that parsing `args` with the table `name`
// throws; "" when it throws none.
std::string error_of(const std::string& name, const std::vector<std::string>& args) {
  try {
    parse(command(name), args);
  } catch (const vitkd::UserError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "not one line: " << e.what();
    return e.what();
  }
  return "";
}

TEST(Args, UnknownFlagNamesTheNearestValidOne) {
  EXPECT_EQ(error_of("export", {"ckpt.h5", "--ot", "dir"}),
            "export: unknown option '--ot' (did you mean '--out'?); run 'vitkd export --help'");
  EXPECT_EQ(error_of("bench gemm", {"--thread=2"}),
            "bench gemm: unknown option '--thread' (did you mean '--threads'?); run 'vitkd bench gemm --help'");
  // Nothing plausibly related: no suggestion, still the way to the help.
  EXPECT_EQ(error_of("keys", {"--verbose"}), "keys: unknown option '--verbose'; run 'vitkd keys --help'");
  EXPECT_EQ(error_of("inspect", {"f.h5", "-v"}), "inspect: unknown option '-v'; run 'vitkd inspect --help'");
}

TEST(Args, FlagWithoutItsValueIsNamed) {
  EXPECT_EQ(error_of("prepare synthetic", {"--out", "x.h5", "--train"}),
            "prepare synthetic: --train needs a value (N); run 'vitkd prepare synthetic --help'");
  // A following flag is not taken as the value.
  EXPECT_EQ(error_of("export", {"c.h5", "--out", "--batch", "4"}),
            "export: --out needs a value (DIR); run 'vitkd export --help'");
  EXPECT_EQ(error_of("train", {"cfg.toml", "--set"}),
            "train: --set needs a value (section.key=value); run 'vitkd train --help'");
}

TEST(Args, NonNumericValueIsRefusedWithWhatTheFlagAccepts) {
  EXPECT_EQ(error_of("bench gemm", {"--threads", "x"}), "bench gemm: --threads must be an integer >= 1, got 'x'");
  EXPECT_EQ(error_of("bench comm", {"--iters", "3.5"}), "bench comm: --iters must be an integer >= 1, got '3.5'");
  EXPECT_EQ(error_of("prepare folder", {"d", "--out", "o.h5", "--size", "8", "--test-fraction", "half"}),
            "prepare folder: --test-fraction must be a number in [0, 1), got 'half'");
  EXPECT_EQ(error_of("export", {"c.h5", "--out", "d", "--batch", "99999999999999999999"}),
            "export: --batch must be an integer in [1, 4096], got '99999999999999999999'");
  EXPECT_EQ(error_of("bench ops", {"--millis", " 5"}), "bench ops: --millis must be an integer >= 1, got ' 5'");
}

TEST(Args, NegativeCountIsRefused) {
  EXPECT_EQ(error_of("prepare synthetic", {"--out", "x.h5", "--train", "-5"}),
            "prepare synthetic: --train must be an integer >= 1, got '-5'");
  EXPECT_EQ(error_of("prepare synthetic", {"--out", "x.h5", "--seed=-1"}),
            "prepare synthetic: --seed must be an integer >= 0, got '-1'");
}

TEST(Args, ValuesOutsideTheRangeOrChoicesAreRefused) {
  EXPECT_EQ(error_of("export", {"c.h5", "--out", "d", "--batch", "5000"}),
            "export: --batch must be an integer in [1, 4096], got '5000'");
  EXPECT_EQ(error_of("prepare folder", {"d", "--out", "o.h5", "--size", "8", "--channels", "2"}),
            "prepare folder: --channels must be 1 or 3, got '2'");
  EXPECT_EQ(error_of("prepare folder", {"d", "--out", "o.h5", "--size", "8", "--test-fraction", "1"}),
            "prepare folder: --test-fraction must be a number in [0, 1), got '1'");
  EXPECT_EQ(error_of("prepare folder", {"d", "--out", "", "--size", "8"}),
            "prepare folder: --out must be a non-empty path, got ''");
}

TEST(Args, MissingRequiredFlagOrArgumentIsNamedWithItsMeaning) {
  EXPECT_EQ(error_of("prepare folder", {"images", "--out", "x.h5"}),
            "prepare folder: --size S (output height = width in pixels) is required; "
            "run 'vitkd prepare folder --help'");
  EXPECT_EQ(error_of("export", {"--out", "dir"}),
            "export: missing CHECKPOINT.h5 (a checkpoint written by 'vitkd train'); run 'vitkd export --help'");
  EXPECT_EQ(error_of("export", {"a.h5", "b.h5", "--out", "dir"}),
            "export: unexpected argument 'b.h5'; run 'vitkd export --help'");
}

TEST(Args, SetMayBeRepeatedInBothForms) {
  const Args a = parse(command("train"), {"--set", "a.b=1", "cfg.toml", "--set=c.d=x=y", "--set", "e.f=-2"});
  EXPECT_EQ(a.positional("CONFIG.toml"), "cfg.toml");
  EXPECT_EQ(a.all("set"), (std::vector<std::string>{"a.b=1", "c.d=x=y", "e.f=-2"}));
  EXPECT_TRUE(parse(command("train"), {"cfg.toml"}).all("set").empty());
}

TEST(Args, OtherFlagsGivenTwiceAreRefused) {
  EXPECT_EQ(error_of("export", {"c.h5", "--out", "a", "--out=b"}),
            "export: --out is given twice ('a' and 'b'); give it once");
}

TEST(Args, AbsentFlagsReadAsTheirDefaults) {
  const vitkd::SyntheticSpec defaults;
  const Args a = parse(command("prepare synthetic"), {"--out", "x.h5", "--classes", "7"});
  EXPECT_EQ(a.text("out"), "x.h5");
  EXPECT_EQ(a.integer("classes"), 7);
  EXPECT_EQ(a.integer("train"), defaults.train);
  EXPECT_EQ(a.integer("size"), defaults.size);
  EXPECT_FALSE(a.given("train"));
  EXPECT_TRUE(a.given("classes"));
  const Args f = parse(command("prepare folder"), {"d", "--out", "o.h5", "--size", "8"});
  EXPECT_DOUBLE_EQ(f.number("test-fraction"), 0.1);
  EXPECT_EQ(f.integer("channels"), 3);
  EXPECT_EQ(parse(command("export"), {"c.h5", "--out", "d"}).text("data"), "");
}

TEST(Args, HelpAnywhereSkipsEveryOtherCheck) {
  EXPECT_TRUE(parse(command("export"), {"--bogus", "-h"}).help());
  EXPECT_TRUE(parse(command("prepare folder"), {"--help"}).help());
  EXPECT_FALSE(parse(command("keys"), {}).help());
}

TEST(Args, HelpListsEveryFlagAndArgumentOfEveryTable) {
  ASSERT_GE(commands().size(), 12u);
  for (const Command& c : commands()) {
    const std::string h = vitkd::cli::help_text(c);
    EXPECT_EQ(h.rfind("usage: vitkd " + c.name, 0), 0u) << h;
    for (const auto& p : c.positionals) EXPECT_NE(h.find(p.name), std::string::npos) << c.name << ": " << p.name;
    for (const auto& f : c.flags) {
      EXPECT_NE(h.find("--" + f.name + (f.metavar.empty() ? "" : " " + f.metavar)), std::string::npos)
          << c.name << " --help lacks --" << f.name << ":\n" << h;
      EXPECT_NE(h.find(f.help), std::string::npos) << c.name << ": --" << f.name;
      if (!f.def.empty()) {
        EXPECT_NE(h.find("default " + f.def), std::string::npos) << c.name << ": --" << f.name;
      }
    }
    EXPECT_NE(h.find("--help"), std::string::npos);
  }
}

TEST(Args, EveryDefaultIsAValueItsFlagAccepts) {
  for (const Command& c : commands())
    for (const Flag& f : c.flags) {
      if (f.def.empty()) continue;
      const Command only{c.name, "", {}, {f}, ""};
      EXPECT_NO_THROW(parse(only, {"--" + f.name + "=" + f.def})) << c.name << ": --" << f.name << " = " << f.def;
    }
}

TEST(Args, KindsAreChosenFromTheirGroupWithSuggestions) {
  EXPECT_EQ(vitkd::cli::pick_kind("bench", {"gemm", "--threads", "2"}), &command("bench gemm"));
  EXPECT_EQ(vitkd::cli::pick_kind("prepare", {"--help"}), nullptr);
  try {
    vitkd::cli::pick_kind("bench", {"gem"});
    ADD_FAILURE() << "no error";
  } catch (const vitkd::UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "bench: unknown benchmark 'gem' (did you mean 'gemm'?); expected gemm, ops, attention, adamw, loader or comm; "
              "run 'vitkd bench --help'");
  }
  EXPECT_THROW(vitkd::cli::pick_kind("prepare", {}), vitkd::UserError);
  EXPECT_THROW(vitkd::cli::pick_kind("prepare", {"--out", "x.h5"}), vitkd::UserError);
}

TEST(Args, SwitchesTakeNoValue) {
  const Command c{"demo", "", {}, {Flag::on_off("dry-run", "only check")}, ""};
  EXPECT_TRUE(parse(c, {"--dry-run"}).on("dry-run"));
  EXPECT_FALSE(parse(c, {}).on("dry-run"));
  EXPECT_THROW(parse(c, {"--dry-run=yes"}), vitkd::UserError);
}

TEST(Args, ReadingAFlagOutsideTheTableIsAProgrammingError) {
  const Args a = parse(command("export"), {"c.h5", "--out", "d"});
  EXPECT_THROW(a.text("outdir"), std::logic_error);
  EXPECT_THROW(a.integer("out"), std::logic_error);  // wrong kind
  EXPECT_THROW(command("exprot"), std::logic_error);
}

TEST(Args, MainHelpListsEveryCommandAndNoKokkosOption) {
  const std::string h = vitkd::cli::main_help();
  for (const Command& c : commands()) EXPECT_NE(h.find("  " + c.name), std::string::npos) << c.name;
  EXPECT_NE(h.find("--version"), std::string::npos);
  EXPECT_EQ(h.find("kokkos"), std::string::npos);
}

}  // namespace
