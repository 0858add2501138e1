#pragma once
// SIGINT/SIGTERM to a one-rank run as a request to stop before its next step: the run then logs the interruption
// and writes its summary ("interrupted by SIGTERM") instead of dying without either. The ranks of a multi-rank run
// get the same from their communicator (mpi_comm.h), whose collectives poll for the signal.
#include <signal.h>

#include <optional>

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

// The stop requests of one run (trainer/run/training_run.cpp), for as long as it lives: a one-rank run installs the
// guard above; the ranks of a multi-rank run leave signals to their communicator, and both calls below are then
// inert.
class RunStopRequests {
 public:
  explicit RunStopRequests(int world_size);

  // Before each step: throws gpt::Error "interrupted by SIGTERM (signal 15)" when a signal has arrived.
  void throw_if_requested() const;

  // The signal that arrived during the run (RunResult::interrupted_by), 0 if none or for a rank of W > 1.
  int interrupted_by() const;

 private:
  std::optional<StopRequestGuard> guard_;
};

}  // namespace gpt
