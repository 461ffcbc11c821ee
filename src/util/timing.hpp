#pragma once
// Wall-clock time per training phase, per step (seconds, steady clock).
#include <ATen/record_function.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vitkd {

enum class Phase : int {
  DataWait = 0,     ///< waiting for the prefetch queue + normalize/augment kernel
  TeacherForward,   ///< teacher logits (no grad)
  SiftForward,      ///< sifting's no-grad selection pass
  StudentForward,   ///< forward + loss of the trained model
  Backward,         ///< autograd backward
  CommWait,         ///< gradient reduce-scatter (time not hidden by backward)
  Optimizer,        ///< grad norm + AdamW on the shard
  AllGather,        ///< parameter all-gather
  Checkpoint,       ///< checkpoint writes
  Eval,             ///< test-set evaluation
  Count
};
constexpr int kNumPhases = static_cast<int>(Phase::Count);
constexpr std::array<const char*, kNumPhases> kPhaseNames = {
    "data_wait", "teacher_forward", "sift_forward", "student_forward", "backward",
    "comm_wait", "optimizer",       "all_gather",   "checkpoint",      "eval"};

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Marks phase boundaries in a device's queue and turns them into seconds:
/// on a GPU, CUDA events recorded on the compute stream
/// (comm/cuda_runtime.hpp), so that queued GPU work is charged to the phase
/// that queued it without making the host wait at every boundary.
class PhaseMarker {
 public:
  virtual ~PhaseMarker() = default;
  /// Records the start (`begin`) or the end of phase `p`; phases may nest
  /// but one phase does not contain itself.
  virtual void mark(Phase p, bool begin) = 0;
  /// Waits for the last mark, then adds to `seconds` the time between each
  /// begin and its end recorded since the last call, and forgets them. Call
  /// it outside every phase (a begin without an end is dropped).
  virtual void settle(std::array<double, kNumPhases>& seconds) = 0;
  /// As settle(), but without waiting for the marks recorded since the last
  /// call: those are kept for the next call (a lag of one call, so that the
  /// host never waits for the device work it has just queued); the older
  /// ones are read. A marker that does not queue (host timing) settles all.
  virtual void settle_lagged(std::array<double, kNumPhases>& seconds) { settle(seconds); }
};

/// One mark of a PhaseMarker, in the order recorded.
struct PhaseMark {
  Phase phase;
  bool begin;  ///< start (true) or end (false) of the phase
};

/// Adds to `seconds[p]` elapsed(i, j) (seconds) for each begin mark i of
/// phase p and its end mark j, in `marks`; a begin without an end is dropped.
template <class Elapsed>
void add_phase_spans(const std::vector<PhaseMark>& marks, Elapsed&& elapsed,
                     std::array<double, kNumPhases>& seconds) {
  std::array<int, kNumPhases> open;
  open.fill(-1);
  for (size_t i = 0; i < marks.size(); ++i) {
    const int p = static_cast<int>(marks[i].phase);
    if (marks[i].begin) {
      open[p] = static_cast<int>(i);
    } else if (open[p] >= 0) {
      seconds[p] += elapsed(static_cast<size_t>(open[p]), i);
      open[p] = -1;
    }
  }
}

/// Accumulates seconds per phase; `step` holds the current step's times and
/// `total` the whole run's. Without a marker a phase is the host's wall-clock
/// time between its start and end. With `marker` set (a run on a GPU), the
/// marker's times replace it; they reach `step` and `total` when settled:
/// settle_lagged() once per step, before the step's row is written (the row
/// then holds the device times of the step before), and settle() after an
/// evaluation and at the end of the run (everything).
struct PhaseTimes {
  std::array<double, kNumPhases> step{};
  std::array<double, kNumPhases> total{};
  PhaseMarker* marker = nullptr;  ///< not owned; null: host timing
  void add(Phase p, double s) {
    step[static_cast<int>(p)] += s;
    total[static_cast<int>(p)] += s;
  }
  void settle() {
    if (!marker) return;
    std::array<double, kNumPhases> s{};
    marker->settle(s);
    for (int i = 0; i < kNumPhases; ++i) add(static_cast<Phase>(i), s[i]);
  }
  /// Once per step on a GPU: the device times of the step before (see
  /// PhaseMarker::settle_lagged); settle() after the last step reads the rest.
  void settle_lagged() {
    if (!marker) return;
    std::array<double, kNumPhases> s{};
    marker->settle_lagged(s);
    for (int i = 0; i < kNumPhases; ++i) add(static_cast<Phase>(i), s[i]);
  }
  void next_step() { step.fill(0.0); }
};

/// "vitkd::<phase name>": a phase's scope in a profile (train.profile_steps).
inline const char* phase_scope_name(Phase p) {
  static const std::array<std::string, kNumPhases> names = [] {
    std::array<std::string, kNumPhases> n;
    for (int i = 0; i < kNumPhases; ++i) n[i] = std::string("vitkd::") + kPhaseNames[i];
    return n;
  }();
  return names[static_cast<int>(p)].c_str();
}

/// Times a scope into one phase; with a null `t` it times nothing (callers
/// whose caller may not want timings pass the pointer through). While
/// LibTorch's profiler records, the phase is also a scope of the trace named
/// phase_scope_name(p), so that analysis/profile_ops.py --within can split a
/// step's operators by phase.
class ScopedPhase {
 public:
  ScopedPhase(PhaseTimes* t, Phase p) : t_(t), p_(p), t0_(start(t, p)) {
    if (!t_) return;
    scope_.emplace(at::RecordScope::USER_SCOPE);
    if (scope_->isActive()) scope_->before(phase_scope_name(p), c10::ArrayRef<const c10::IValue>{});
  }
  ScopedPhase(PhaseTimes& t, Phase p) : ScopedPhase(&t, p) {}
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;
  ~ScopedPhase() {
    if (!t_) return;
    if (t_->marker)
      t_->marker->mark(p_, false);
    else
      t_->add(p_, seconds_since(t0_));
  }

 private:
  static Clock::time_point start(PhaseTimes* t, Phase p) {
    if (t && t->marker) t->marker->mark(p, true);
    return Clock::now();
  }
  PhaseTimes* t_;
  Phase p_;
  Clock::time_point t0_;
  std::optional<at::RecordFunction> scope_;  ///< ends after the time is taken (members outlive the body)
};

/// Milliseconds per call of fn, repeated for about `seconds` after one untimed
/// warm-up call (benchmarks).
template <class Fn>
double ms_per_call(Fn&& fn, double seconds) {
  fn();
  int64_t iters = 0;
  const auto t0 = Clock::now();
  double dt = 0;
  do {
    fn();
    ++iters;
    dt = seconds_since(t0);
  } while (dt < seconds);
  return dt / iters * 1e3;
}

}  // namespace vitkd
