#pragma once
// The per-operator profile of a few training steps (train.profile_steps,
// train.profile_from_step): LibTorch's autograd profiler records every
// operator those steps run, on every rank, and writes a Chrome trace,
// run.out_dir/profile-rank<R>.json, when they end. analysis/profile_ops.py
// turns a trace into a per-operator table (docs/performance.md).
//
// Each step runs inside a "vitkd::step" scope (StepEngine::run), so a trace
// says how many steps it holds. On a GPU the operators' times are the host's
// (launches and waits), not the kernels'.
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include <torch/csrc/autograd/profiler_legacy.h>

namespace vitkd {

/// Which steps the profile records. Built by profile_spec() in train/setup.cpp.
struct ProfileSpec {
  int64_t steps = 0;      ///< optimizer steps profiled, at most (0 = off; train.profile_steps)
  int64_t from_step = 0;  ///< the first step profiled, 1-based, at the earliest (train.profile_from_step)
};

class StepProfiler {
 public:
  /// Off when spec.steps is 0. The trace of rank `rank` goes to
  /// `out_dir`/profile-rank<rank>.json.
  StepProfiler(const ProfileSpec& spec, const std::string& out_dir, int rank);
  /// Finishes a profile still open (e.g. when an error ends the run).
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  /// Before the step that will be step `next_step` (1-based): starts the
  /// profile at the first step at or after train.profile_from_step.
  void before_step(int64_t next_step);
  /// After the step (its metrics reduced): `trained` is whether it was an
  /// optimizer step, `more` whether the next one follows in the same epoch
  /// of this run. Ends the profile after train.profile_steps steps, or
  /// earlier where the epoch or the run ends first.
  void after_step(bool trained, bool more);

 private:
  void finish();

  int64_t steps_ = 0;   ///< steps to profile (0 = off)
  int64_t from_ = 0;    ///< the first step profiled, at the earliest
  int64_t first_ = 0;   ///< the first step of the open profile
  int64_t done_ = 0;    ///< steps recorded so far
  bool ended_ = false;  ///< the profile was written
  std::string path_;
  std::unique_ptr<std::ofstream> out_;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> guard_;
};

}  // namespace vitkd
