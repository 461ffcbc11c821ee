// vitkd: distill a large Vision Transformer into a small one, data-parallel
// over MPI ranks. This file only wires the subcommands to their modules.
#include <Kokkos_Core.hpp>
#include <c10/util/Exception.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "cmd/commands.hpp"
#include "comm/world.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace {

const char* kUsage =
    "usage: vitkd <command> [args]\n"
    "  train CONFIG.toml [--set section.key=value ...]   train a teacher or distill a student\n"
    "  prepare fashion-mnist --out FILE.h5 [--source DIR]\n"
    "  prepare synthetic --out FILE.h5 [--train N --test N --size S --channels C --classes K --seed S]\n"
    "  prepare folder DIR --out FILE.h5 --size S [--test-fraction F --seed N --channels 1|3]\n"
    "                                                     one subfolder of PNG/JPEG files per class\n"
    "  export CHECKPOINT.h5 --out DIR [--data FILE.h5]    the student for PyTorch (weights, loader, reference logits)\n"
    "  bench gemm|ops|comm [...]                          measure matrix-product, GELU and communication rates\n"
    "  inspect FILE.h5                                    summarise a dataset, checkpoint or timing log\n"
    "  keys                                               list every configuration key and default\n"
    "  version\n"
    "Launch with mpirun/srun for several ranks. Exit codes: 0 ok, 1 runtime failure,\n"
    "2 user error (usage, configuration, data), 75 preempted after a checkpoint.\n";

int run(const std::vector<std::string>& args) {
  using namespace vitkd;
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    if (world().root()) std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kExitUser : kExitOk;
  }
  const std::string cmd = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "version") {
    if (world().root()) std::printf("vitkd %s\n", VITKD_VERSION);
    return kExitOk;
  }
  if (cmd == "keys") return keys_main(rest);
  if (cmd == "prepare") return prepare_main(rest);
  if (cmd == "inspect") return inspect_main(rest);
  if (cmd == "bench") return bench_main(rest);
  if (cmd == "export") return export_main(rest);
  if (cmd == "train") return train_command(rest);
  std::vector<std::string> cmds{"train", "prepare", "export", "bench", "inspect", "keys", "version", "help"};
  const std::string n = nearest(cmd, cmds);
  throw UserError("unknown command '" + cmd + "'" + (n.empty() ? "" : " (did you mean '" + n + "'?)") +
                  "; run `vitkd help`");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace vitkd;
  int code = kExitOk;
  try {
    // A file-size limit (ulimit -f, quota-like sandboxes) makes writes fail
    // with EFBIG, reported through the error path, instead of killing the rank.
    std::signal(SIGXFSZ, SIG_IGN);
    init_world(&argc, &argv);
    h5_silence_errors();
    Kokkos::ScopeGuard kokkos(argc, argv);
    std::vector<std::string> args(argv + 1, argv + argc);
    code = run(args);
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
