#pragma once
// Test-only fault injection, read once from the environment (documented in
// docs/file-formats.md; never set them in production):
//   VITKD_TEST_PREEMPT_AT_STEP=k     act as if a signal arrived during step k
//   VITKD_TEST_KILL_RANK=r:k         rank r kills itself (SIGKILL) at step k
//   VITKD_TEST_CORRUPT_BATCH=k[:n]   rank 0's inputs of steps k..k+n-1 become NaN
//   VITKD_TEST_SLOW_RANK=r:ms        rank r sleeps ms milliseconds every step
//   VITKD_TEST_SIFT_ZERO_LOSS_RANK=r rank r reports zero sifting losses
//   VITKD_TEST_CHECKPOINT_FAULT=fail:r|kill:r[:stage]  rank r fails / is killed
//                                    during a checkpoint write, at stage
//                                    write (default: halfway through the writes,
//                                    before the close), rename (closed and synced,
//                                    before the rename) or renamed (after the rename,
//                                    before the directory sync and publishing)
//   VITKD_TEST_START_PAUSE_MS=ms     every process pauses ms milliseconds at the
//                                    start of main, before MPI_Init (a slow start-up),
//                                    after printing "vitkd: test fault: start-up pause"
//   VITKD_TEST_USER_ERROR_RANK=r     rank r alone throws a UserError at the start
//                                    of `vitkd train` (cmd/train.cpp)
// One parser for all of them, so that the training loop and io/checkpoint.cpp
// read the same values.
#include <cstdint>

namespace vitkd {

struct TestFaults {
  int64_t preempt_step = -1;
  int kill_rank = -1;
  int64_t kill_step = -1;
  int64_t corrupt_step = -1, corrupt_count = 1;
  int slow_rank = -1, slow_ms = 0;
  int sift_zero_rank = -1;
  /// VITKD_TEST_CHECKPOINT_FAULT: rank that fails (die) or is killed halfway through a checkpoint write.
  int checkpoint_fail_rank = -1, checkpoint_kill_rank = -1;
  /// The stage of the checkpoint fault.
  enum class CheckpointStage { Write, Rename, Renamed } checkpoint_stage = CheckpointStage::Write;
  /// VITKD_TEST_START_PAUSE_MS.
  int start_pause_ms = 0;
  /// VITKD_TEST_USER_ERROR_RANK: rank that alone finds a user error.
  int user_error_rank = -1;
  /// Parsed from the environment once.
  static const TestFaults& get();
  bool corrupt(int64_t step) const {
    return corrupt_step >= 0 && step >= corrupt_step && step < corrupt_step + corrupt_count;
  }
};

/// Test-only: VITKD_TEST_START_PAUSE_MS (before MPI_Init; signals do not shorten it).
void test_start_pause();

}  // namespace vitkd
