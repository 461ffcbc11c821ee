#pragma once
// Test-only fault injection, read once from the environment (documented in
// docs/file-formats.md; never set them in production):
//   VITKD_TEST_PREEMPT_AT_STEP=k     act as if a signal arrived during step k
//   VITKD_TEST_KILL_RANK=r:k         rank r kills itself (SIGKILL) at step k
//   VITKD_TEST_CORRUPT_BATCH=k[:n]   rank 0's inputs of steps k..k+n-1 become NaN
//   VITKD_TEST_SLOW_RANK=r:ms        rank r sleeps ms milliseconds every step
//   VITKD_TEST_SIFT_ZERO_LOSS_RANK=r rank r reports zero sifting losses
//   VITKD_TEST_CHECKPOINT_FAULT=fail:r|kill:r  rank r fails / is killed halfway
//                                    through a checkpoint write
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
  /// VITKD_TEST_USER_ERROR_RANK: rank that alone finds a user error.
  int user_error_rank = -1;
  /// Parsed from the environment once.
  static const TestFaults& get();
  bool corrupt(int64_t step) const {
    return corrupt_step >= 0 && step >= corrupt_step && step < corrupt_step + corrupt_count;
  }
};

}  // namespace vitkd
