#include "train/preempt.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace vitkd {
namespace {
volatile std::sig_atomic_t g_signalled = 0;
extern "C" void on_preempt_signal(int) { g_signalled = 1; }
}  // namespace

void install_preemption_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_preempt_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

bool preemption_signalled() { return g_signalled != 0; }

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
    return t;
  }();
  return f;
}

}  // namespace vitkd
