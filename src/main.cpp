// vitkd: distill a large Vision Transformer into a small one, data-parallel
// over MPI ranks. This file only wires: Kokkos gets the --kokkos-* arguments,
// every other argument goes to the subcommand (src/cmd/, tables in cmd/args).
#include <c10/util/Exception.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "cmd/args.hpp"
#include "cmd/commands.hpp"
#include "comm/world.hpp"
#include "io/h5.hpp"
#include "train/preempt.hpp"
#include "util/error.hpp"
#include "util/kokkos_session.hpp"
#include "util/strings.hpp"
#include "util/test_faults.hpp"

#ifndef VITKD_GIT_COMMIT
#define VITKD_GIT_COMMIT ""  // set by CMake when configured from a git checkout
#endif

namespace {

using Subcommand = int (*)(const std::vector<std::string>&);

int version_main(const std::vector<std::string>& args) {
  using namespace vitkd;
  const cli::Command& cmd = cli::command("version");
  if (cli::parse(cmd, args).help()) return cli::print_help(cli::help_text(cmd));
  const std::string commit = VITKD_GIT_COMMIT;
  return cli::print_help(std::string("vitkd ") + VITKD_VERSION +
                         (commit.empty() ? "" : " (git " + commit + ")") + "\n");
}

int run(const std::vector<std::string>& args);

// `vitkd help [COMMAND]`: the overview, or COMMAND --help.
int help_main(const std::vector<std::string>& args) {
  using namespace vitkd;
  const cli::Command& cmd = cli::command("help");
  const cli::Args a = cli::parse(cmd, args);
  if (a.on("markdown") && !a.help()) return cli::print_help(cli::commands_markdown());
  if (a.help() || a.positional("COMMAND").empty()) return cli::print_help(cli::main_help());
  return run({a.positional("COMMAND"), "--help"});
}

int run(const std::vector<std::string>& args) {
  using namespace vitkd;
  static const std::vector<std::pair<std::string, Subcommand>> kCommands = {
      {"train", train_command}, {"prepare", prepare_main}, {"export", export_main},
      {"inspect", inspect_main}, {"bench", bench_main},    {"keys", keys_main},
      {"teacher-cache", teacher_cache_main},
      {"version", version_main}, {"help", help_main}};
  if (args.empty()) {
    if (world().root()) std::fputs(cli::main_help().c_str(), stderr);
    return kExitUser;
  }
  const std::string& name = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (name == "-h" || name == "--help") return help_main(rest);
  if (name == "--version") return version_main(rest);
  std::vector<std::string> names;
  // Only `train` can checkpoint: the others end on SIGTERM/SIGUSR1 as usual.
  if (name != "train") release_preemption_signals();
  for (const auto& c : kCommands) {
    if (c.first == name) return c.second(rest);
    names.push_back(c.first);
  }
  const std::string n = nearest(name, names);
  throw UserError("unknown command '" + name + "'" + (n.empty() ? "" : " (did you mean '" + n + "'?)") +
                  "; run 'vitkd --help'");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace vitkd;
  int code = kExitOk;
  // First of all: SIGTERM/SIGUSR1 (preemption, Slurm's time-limit warning)
  // during start-up are remembered, and `train` checkpoints as soon as it can
  // (train/preempt.hpp).
  install_preemption_handlers();
  test_start_pause();  // test-only: VITKD_TEST_START_PAUSE_MS
  try {
    // A file-size limit (ulimit -f, quota-like sandboxes) makes writes fail
    // with EFBIG, reported through the error path, instead of killing the rank.
    std::signal(SIGXFSZ, SIG_IGN);
    init_world(&argc, &argv);
    install_preemption_handlers();  // again, in case the MPI library replaced them
    h5_silence_errors();
    // Kokkos sees only its own --kokkos-* arguments (else it would answer
    // vitkd's --help with its own page); vitkd sees the rest. Kokkos starts
    // when a subcommand needs it (train: with train.threads threads).
    std::vector<std::string> kokkos_args, args;
    bool kokkos_help = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a.rfind("--kokkos-", 0) == 0) {
        kokkos_args.push_back(a);
        kokkos_help = kokkos_help || a == "--kokkos-help";
      } else {
        args.push_back(a);
      }
    }
    kokkos_set_arguments(kokkos_args);
    KokkosScope kokkos;
    if (kokkos_help) kokkos_ensure(0);  // Kokkos prints its page
    // `vitkd --kokkos-help` alone: nothing else to do.
    code = (kokkos_help && args.empty()) ? kExitOk : run(args);
  } catch (const UserError& e) {
    die(kExitUser, e.what(), e.collective());
  } catch (const RuntimeError& e) {
    die(kExitRuntime, e.what(), e.collective());
  } catch (const c10::Error& e) {
    die(kExitRuntime, std::string("LibTorch: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    die(kExitRuntime, e.what());
  }
  finalize_world();
  return code;
}
