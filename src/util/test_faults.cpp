#include "util/test_faults.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <chrono>
#include <thread>

namespace vitkd {

const TestFaults& TestFaults::get() {
  static const TestFaults f = [] {
    TestFaults t;
    long long a = -1, b = -1;
    if (const char* v = std::getenv("VITKD_TEST_PREEMPT_AT_STEP")) t.preempt_step = std::atoll(v);
    if (const char* v = std::getenv("VITKD_TEST_KILL_RANK"))
      if (std::sscanf(v, "%lld:%lld", &a, &b) == 2) t.kill_rank = int(a), t.kill_step = b;
    if (const char* v = std::getenv("VITKD_TEST_CORRUPT_BATCH")) {
      b = 1;
      if (std::sscanf(v, "%lld:%lld", &a, &b) >= 1) t.corrupt_step = a, t.corrupt_count = b;
    }
    if (const char* v = std::getenv("VITKD_TEST_SLOW_RANK"))
      if (std::sscanf(v, "%lld:%lld", &a, &b) == 2) t.slow_rank = int(a), t.slow_ms = int(b);
    if (const char* v = std::getenv("VITKD_TEST_SIFT_ZERO_LOSS_RANK")) t.sift_zero_rank = std::atoi(v);
    if (const char* v = std::getenv("VITKD_TEST_USER_ERROR_RANK")) t.user_error_rank = std::atoi(v);
    if (const char* v = std::getenv("VITKD_TEST_CHECKPOINT_FAULT")) {
      char kind[8] = {0}, stage[16] = {0};
      int r = -1;
      if (std::sscanf(v, "%7[a-z]:%d:%15[a-z]", kind, &r, stage) >= 2) {
        if (std::strcmp(kind, "fail") == 0) t.checkpoint_fail_rank = r;
        if (std::strcmp(kind, "kill") == 0) t.checkpoint_kill_rank = r;
        if (std::strcmp(stage, "rename") == 0) t.checkpoint_stage = CheckpointStage::Rename;
        if (std::strcmp(stage, "renamed") == 0) t.checkpoint_stage = CheckpointStage::Renamed;
      }
    }
    if (const char* v = std::getenv("VITKD_TEST_START_PAUSE_MS")) t.start_pause_ms = std::atoi(v);
    return t;
  }();
  return f;
}

void test_start_pause() {
  const int ms = TestFaults::get().start_pause_ms;
  if (ms <= 0) return;
  std::fprintf(stderr, "vitkd: test fault: start-up pause of %d ms (VITKD_TEST_START_PAUSE_MS)\n", ms);
  std::fflush(stderr);
  // sleep_for resumes after a signal handler returns (EINTR): the whole pause.
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace vitkd
