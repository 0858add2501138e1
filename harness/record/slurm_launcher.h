#pragma once
// Runs each planned run as one Slurm job: `sbatch` of a small batch script (in the run folder) that calls
// `srun <trainer argv>`, one task per GPU (the trainer reads its rank from SLURM_PROCID/SLURM_NTASKS; under
// Slurm `--gpus` is not passed to it) or one task without GPUs. The job writes its output to
// <out>/slurm-<job id>.log and its exit status to <out>/slurm-<job id>.exit; <out>/slurm_job.json names the
// current job, so a later `record --resume` adopts jobs that are still queued or running, and harvests jobs
// that ended while no harness was watching, instead of submitting them again.
//
// States come from `scontrol show job` (jobs the controller still remembers), then `sacct` (when accounting
// is enabled), then the .exit file. Final states map to run statuses:
//   COMPLETED, FAILED            -> the exit status and log decide (ok, failed, diverged, incomplete)
//   TIMEOUT, DEADLINE            -> timeout
//   CANCELLED, PREEMPTED         -> killed (re-run by --resume; PREEMPTED is resubmitted at once with
//                                   --slurm-resubmit-preempted)
//   NODE_FAIL, BOOT_FAIL, OUT_OF_MEMORY, other -> failed, the reason naming the Slurm state
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "harness/record/run_launcher.h"

namespace gpt::harness::slurm {

// One job as Slurm reports it.
struct JobState {
  std::string job_id;
  std::string state;  // e.g. PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, PREEMPTED, NODE_FAIL
  int exit_code = 0;  // ExitCode=a:b -> a
  int signal = 0;     //               -> b
  std::string reason;
};

// Parses `scontrol show job -o` output (one job per line; unknown lines are skipped).
std::vector<JobState> parse_scontrol(const std::string& text);
// Parses `sacct -n -X -P -o JobID,State,ExitCode` output ("CANCELLED by 0" becomes CANCELLED).
std::vector<JobState> parse_sacct(const std::string& text);
// True for states in which the job may still run (PENDING, RUNNING, REQUEUED, SUSPENDED, ...).
bool is_active(const std::string& state);

// What a final state means for the run.
struct Outcome {
  RunEnd end = RunEnd::exited;
  ExitInfo exit;
  std::optional<RunStatus> forced_status;  // overrides the status harvest_run derives (node failures)
  std::string note;                        // prepended to the reason, e.g. "Slurm job 12 NODE_FAIL"
  bool preempted = false;
};
Outcome outcome_of(const JobState& job);

// The batch script of a run (argv already has its placeholders filled in).
struct JobShape {
  int gpus = 0;  // 0: one task, no GPUs; G: G tasks, one GPU each, on one node
  std::optional<int> time_minutes;
};
std::string batch_script(const RunPlan& plan, const JobShape& shape, const SlurmSettings& settings);
// argv without a `--gpus N` / `--gpus=N` pair (the ranks come from srun under Slurm).
std::vector<std::string> without_gpus_flag(std::vector<std::string> argv);
// The time budget when neither --slurm-time nor --timeout is given.
int default_time_minutes(const std::string& recipe);

std::unique_ptr<RunLauncher> make_slurm_launcher(const SlurmSettings& settings, const std::string& recipe, int gpus);

}  // namespace gpt::harness::slurm
