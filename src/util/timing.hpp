#pragma once
// Wall-clock time per training phase, per step (seconds, steady clock).
#include <array>
#include <chrono>
#include <cstdint>

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

/// Accumulates seconds per phase; `step` holds the current step's times and
/// `total` the whole run's. With `sync` set (a run on a GPU), each phase
/// waits for the device at its start and end, so that queued GPU work is
/// charged to the phase that queued it.
struct PhaseTimes {
  std::array<double, kNumPhases> step{};
  std::array<double, kNumPhases> total{};
  void (*sync)(int device) = nullptr;  ///< waits for device `sync_device` (null: host timing only)
  int sync_device = 0;
  void wait_for_device() const {
    if (sync) sync(sync_device);
  }
  void add(Phase p, double s) {
    step[static_cast<int>(p)] += s;
    total[static_cast<int>(p)] += s;
  }
  void next_step() { step.fill(0.0); }
};

/// Times a scope into one phase; with a null `t` it times nothing (callers
/// whose caller may not want timings pass the pointer through).
class ScopedPhase {
 public:
  ScopedPhase(PhaseTimes* t, Phase p) : t_(t), p_(p), t0_(start(t)) {}
  ScopedPhase(PhaseTimes& t, Phase p) : ScopedPhase(&t, p) {}
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;
  ~ScopedPhase() {
    if (!t_) return;
    t_->wait_for_device();
    t_->add(p_, seconds_since(t0_));
  }

 private:
  static Clock::time_point start(const PhaseTimes* t) {
    if (t) t->wait_for_device();
    return Clock::now();
  }
  PhaseTimes* t_;
  Phase p_;
  Clock::time_point t0_;
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
