#pragma once
// Where a sweep's runs execute: as local child processes (the sweep runner) or as Slurm jobs. `record`
// picks one with --launcher; every launcher stores each run the moment it ends and returns when all planned
// runs are stored or a stop was requested (SIGINT/SIGTERM).
#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/record/sweep_runner.h"
#include "harness/store/store.h"

namespace gpt::harness {

// Slurm settings (see slurm_launcher.h for what each becomes in the job).
struct SlurmSettings {
  std::string partition, account, qos;
  std::vector<std::string> sbatch_args;  // extra sbatch options, passed as given
  std::vector<std::string> srun_args;    // extra srun options inside the job
  std::optional<int> time_minutes;       // --time; default: --timeout, else the recipe's budget
  bool resubmit_preempted = false;       // submit a preempted run again (up to max_resubmits times)
  int max_resubmits = 3;
  double poll_s = 2.0;  // seconds between squeue/scontrol polls
};

struct LauncherSettings {
  std::string kind = "local";  // local | slurm
  SlurmSettings slurm;
};

// A CLI11 check from one of safe_names.h's `*_problem` functions: the flag's error says what was expected.
CLI::Validator name_check(std::optional<std::string> (*problem)(std::string_view), const std::string& what);

// Adds --launcher and the --slurm-* options to a command.
void add_launcher_options(CLI::App& command, LauncherSettings& settings);
// The settings a sweep was recorded with (sweep params "launcher", "slurm.*"), so --resume uses them again;
// options given on the --resume command line win (`explicit_options` are the ones the user passed).
void save_launcher_settings(Store& store, std::int64_t sweep_id, const LauncherSettings& settings);
LauncherSettings load_launcher_settings(Store& store, std::int64_t sweep_id, const LauncherSettings& given,
                                        bool launcher_given);

class RunLauncher {
 public:
  virtual ~RunLauncher() = default;
  virtual SweepRunResult run(Store& store, std::int64_t sweep_id, const std::vector<RunPlan>& plans,
                             const SweepRunOptions& options) = 0;
  // What to tell the user after an interruption (the local launcher killed its runs; Slurm jobs go on).
  virtual std::string interrupted_note() const = 0;
};

// `recipe` and `gpus` size the Slurm job (tasks, GPUs, time budget).
std::unique_ptr<RunLauncher> make_launcher(const LauncherSettings& settings, const std::string& recipe, int gpus);

}  // namespace gpt::harness
