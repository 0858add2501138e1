#include "trainer/run/stop_request.h"

#include <atomic>

#include "base/check.h"
#include "trainer/comm/rank_status.h"

namespace gpt {

namespace {

std::atomic<int> g_stop_signal{0};
extern "C" void remember_stop_signal(int sig) { g_stop_signal.store(sig); }

}  // namespace

StopRequestGuard::StopRequestGuard() {
  g_stop_signal.store(0);
  struct sigaction action {};
  action.sa_handler = remember_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
}

StopRequestGuard::~StopRequestGuard() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
}

int StopRequestGuard::received() { return g_stop_signal.load(); }

void StopRequestGuard::throw_if_requested() {
  // An interruption is what the user asked for, not a fault of the code: its message carries no source location.
  if (const int sig = received()) {
    throw Error("interrupted by " + std::string(signal_name(sig)) + " (signal " + std::to_string(sig) + ")");
  }
}

RunStopRequests::RunStopRequests(int world_size) {
  if (world_size == 1) guard_.emplace();
}

void RunStopRequests::throw_if_requested() const {
  if (guard_) StopRequestGuard::throw_if_requested();
}

int RunStopRequests::interrupted_by() const { return guard_ ? StopRequestGuard::received() : 0; }

}  // namespace gpt
