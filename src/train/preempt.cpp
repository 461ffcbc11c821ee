#include "train/preempt.hpp"

#include <csignal>

namespace vitkd {
namespace {
volatile std::sig_atomic_t g_signalled = 0;  // the signal number, 0 if none
extern "C" void on_preempt_signal(int sig) { g_signalled = sig; }
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

void release_preemption_signals() {
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGUSR1, SIG_DFL);
  if (g_signalled != 0) std::raise(g_signalled);
}

}  // namespace vitkd
