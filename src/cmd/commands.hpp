#pragma once
// vitkd's subcommands: each a thin layer over the libraries below it, taking
// the arguments after its name and returning the process exit code
// (util/error.hpp: kExitOk, kExitUser, ...). main.cpp dispatches to them.
// Each checks its arguments against its table in cmd/args.cpp (one parser;
// `--help` is printed from the same table) before it does anything else.
#include <string>
#include <vector>

namespace vitkd {

/// `vitkd train CONFIG.toml [--set section.key=value ...]` (cmd/train.cpp)
int train_command(const std::vector<std::string>& args);
/// `vitkd prepare fashion-mnist|synthetic|folder ...` (cmd/prepare.cpp)
int prepare_main(const std::vector<std::string>& args);
/// `vitkd export CHECKPOINT.h5 --out DIR ...` (cmd/export.cpp; layout in cmd/export.hpp)
int export_main(const std::vector<std::string>& args);
/// `vitkd inspect FILE.h5`: a summary of a dataset, checkpoint or timing log (cmd/inspect.cpp)
int inspect_main(const std::vector<std::string>& args);
/// `vitkd bench gemm|ops|attention|adamw|comm ...`: this machine's ceilings (cmd/bench.cpp)
int bench_main(const std::vector<std::string>& args);
/// `vitkd teacher-cache CONFIG.toml [--set ...]`: the teacher-view cache (cmd/teacher_cache.cpp)
int teacher_cache_main(const std::vector<std::string>& args);
/// `vitkd keys`: every configuration key, its type, default and meaning (cmd/train.cpp)
int keys_main(const std::vector<std::string>& args);

/// `vitkd bench loader --crop`'s word for no training crop (the evaluation
/// view), beside data.crop's words.
inline constexpr const char* kEvaluationView = "none";

}  // namespace vitkd
