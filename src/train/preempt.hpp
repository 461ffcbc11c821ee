#pragma once
// Preemption and test-only fault injection for the training loop.
//
// SIGTERM and SIGUSR1 (Slurm's time-limit warning with --signal=B:USR1@120,
// forwarded by the job script; mpirun forwards SIGUSR1 to every rank) only
// set a flag. The trainer ORs the flags of all ranks in the per-step
// allreduce it already does, finishes the step, writes a checkpoint and exits
// with code 75 (kExitPreempted), which the job scripts requeue on.
//
// Test-only faults, read once from the environment (documented in README,
// "Testing"; never set them in production):
//   VITKD_TEST_PREEMPT_AT_STEP=k     act as if a signal arrived during step k
//   VITKD_TEST_KILL_RANK=r:k         rank r kills itself (SIGKILL) at step k
//   VITKD_TEST_CORRUPT_BATCH=k[:n]   rank 0's inputs of steps k..k+n-1 become NaN
//   VITKD_TEST_SLOW_RANK=r:ms        rank r sleeps ms milliseconds every step
//   VITKD_TEST_SIFT_ZERO_LOSS_RANK=r rank r reports zero sifting losses
//   VITKD_TEST_CHECKPOINT_FAULT=fail:r|kill:r  (io/checkpoint.cpp)
#include <cstdint>

namespace vitkd {

/// Installs the SIGTERM/SIGUSR1 handlers (idempotent).
void install_preemption_handlers();
/// True once this process received SIGTERM or SIGUSR1.
bool preemption_signalled();

struct TestFaults {
  int64_t preempt_step = -1;
  int kill_rank = -1;
  int64_t kill_step = -1;
  int64_t corrupt_step = -1, corrupt_count = 1;
  int slow_rank = -1, slow_ms = 0;
  int sift_zero_rank = -1;
  /// Parsed from the environment once.
  static const TestFaults& get();
  bool corrupt(int64_t step) const {
    return corrupt_step >= 0 && step >= corrupt_step && step < corrupt_step + corrupt_count;
  }
};

}  // namespace vitkd
