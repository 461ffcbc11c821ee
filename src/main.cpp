// vitkd: distill a large Vision Transformer into a small one, data-parallel
// over MPI ranks. This file only wires the subcommands to their modules.
#include <Kokkos_Core.hpp>
#include <c10/util/Exception.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "dist/world.hpp"
#include "io/export.hpp"
#include "io/h5.hpp"
#include "io/inspect.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"

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
  if (cmd == "keys") {
    if (world().root())
      for (const auto& k : config_keys())
        std::printf("%-28s %-8s %-16s %s\n", k.name.c_str(), k.type.c_str(), k.def.c_str(),
                    k.help.c_str());
    return kExitOk;
  }
  if (cmd == "prepare") return prepare_main(rest);
  if (cmd == "inspect") return inspect_main(rest);
  if (cmd == "bench") return bench_main(rest);
  if (cmd == "export") return export_main(rest);
  if (cmd == "train") {
    if (rest.empty() || rest[0].rfind("--", 0) == 0)
      throw UserError("train: missing CONFIG.toml; usage: vitkd train CONFIG.toml [--set section.key=value ...]");
    std::vector<std::string> overrides;
    for (size_t i = 1; i < rest.size(); ++i) {
      if (rest[i] == "--set" && i + 1 < rest.size()) {
        overrides.push_back(rest[++i]);
      } else if (rest[i].rfind("--set=", 0) == 0) {
        overrides.push_back(rest[i].substr(6));
      } else {
        throw UserError("train: unexpected argument '" + rest[i] +
                        "'; usage: vitkd train CONFIG.toml [--set section.key=value ...]");
      }
    }
    const Config cfg = load_config(rest[0], overrides);
    return train_main(cfg, rest[0]);
  }
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
