#pragma once
// Runs the planned runs of a sweep, up to `parallel` at a time, and stores each one the moment it ends:
// an interrupted or killed harness loses nothing that finished. Each finished run is spooled to its run
// folder before the insert, which retries with backoff; a run the database never took stays spooled for the
// next command. SIGINT/SIGTERM stop the sweep: the runs in flight are killed (their process groups) and
// stored with status `killed`, which --resume re-runs. Each run folder is locked while its trainer lives.
#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/record/harvest.h"
#include "harness/record/spool.h"
#include "harness/store/store.h"

namespace gpt::harness {

struct SweepRunOptions {
  int parallel = 1;
  std::optional<double> timeout_s;
  // One CUDA_VISIBLE_DEVICES value per parallel slot; empty: the children inherit ours.
  std::vector<std::string> device_partitions;
  std::optional<std::int64_t> environment_id;
  std::ostream* progress = nullptr;  // live progress (a bar when `progress_is_tty`), none if null
  bool progress_is_tty = false;
  std::chrono::milliseconds poll_interval{20};
  InsertRetry insert_retry;  // how long a finished run waits for a locked database before staying spooled
};

struct SweepRunResult {
  int finished = 0;  // runs ended by this call (stored or spooled)
  int spooled = 0;   // of those, runs left in their spool file because the database stayed locked
  int busy = 0;      // runs not started: their folder is locked by a live process (see RunFolderBusy)
  bool interrupted = false;
};

// Installs SIGINT/SIGTERM handlers that request a stop (restoring the old ones when destroyed).
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static bool requested();
  static void request();  // as if a signal had arrived (tests)
  static void clear();
};

// Splits the visible devices into `slots` groups of `gpus_per_run` ("0,1", "2,3", ...). The device list is
// $CUDA_VISIBLE_DEVICES when set, else 0..slots*gpus_per_run-1; set but empty (no GPUs), every slot gets "".
// Throws if there are too few devices.
std::vector<std::string> device_partitions(int slots, int gpus_per_run, const char* visible_devices);

SweepRunResult run_sweep(Store& store, std::int64_t sweep_id, const std::vector<RunPlan>& plans,
                         const SweepRunOptions& options);

}  // namespace gpt::harness
