#pragma once
// SIGINT/SIGTERM to a one-rank run as a request to stop before its next step: the run then logs the interruption
// and writes its summary ("interrupted by SIGTERM") instead of dying without either. The ranks of a multi-rank run
// get the same from their communicator (mpi_comm.h), whose collectives poll for the signal.
#include <signal.h>

namespace gpt {

class StopRequestGuard {
 public:
  StopRequestGuard();  // installs the handlers (and forgets an earlier request); the destructor restores the old ones
  ~StopRequestGuard();
  StopRequestGuard(const StopRequestGuard&) = delete;
  StopRequestGuard& operator=(const StopRequestGuard&) = delete;

  static int received();  // the signal that arrived while a guard was installed, 0 if none
  // Throws gpt::Error "interrupted by SIGTERM (signal 15)" when a signal has arrived.
  static void throw_if_requested();

 private:
  struct sigaction previous_int_ {
  }, previous_term_{};
};

}  // namespace gpt
