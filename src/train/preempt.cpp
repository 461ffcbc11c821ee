#include "train/preempt.hpp"

#include <csignal>

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

}  // namespace vitkd
