#include "util/test_faults.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

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
      char kind[8] = {0};
      int r = -1;
      if (std::sscanf(v, "%7[a-z]:%d", kind, &r) == 2) {
        if (std::strcmp(kind, "fail") == 0) t.checkpoint_fail_rank = r;
        if (std::strcmp(kind, "kill") == 0) t.checkpoint_kill_rank = r;
      }
    }
    return t;
  }();
  return f;
}

}  // namespace vitkd
