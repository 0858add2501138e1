#pragma once
// The life of a sweep that runs the trainer, shared by `harness record` and `harness compare`: the command line it
// launches, the settings stored with it (typed, so that --resume reads back exactly what was written), resuming it
// (refusing what cannot change), planning the runs still missing, running them, and how a call ends (interrupted,
// runs left spooled, or the command's own verdict).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/record/run_launcher.h"
#include "harness/record/harvest.h"
#include "harness/record/sweep_runner.h"
#include "harness/store/store.h"

namespace gpt::harness {

// ---- the command line ----

// The corpus a recipe trains on when --data is not given (data/default for tiny, data/fineweb10B otherwise).
std::string default_data_dir(const std::string& recipe);
// train_gpt beside the running harness binary.
std::filesystem::path default_trainer();
// Replaces each {key} of `values` in `text`.
std::string substitute_placeholders(std::string text, const std::map<std::string, std::string>& values);
// train_gpt with the contract's flags as placeholders ({recipe} {data} {seed} {run_id} {out}, {gpus} when `gpus` >
// 0), then --backend and each --set: `trainer` is a path, or "{bin}" for a per-arm trainer.
std::vector<std::string> trainer_command_template(const std::string& trainer, int gpus, const std::string& backend,
                                                  const std::vector<std::string>& sets);

// ---- the settings stored with a sweep ----

// A sweep's parameters (`params` rows) written and read back as typed values. A stored value that does not parse
// as its type is an error naming the sweep, its id, the key and the value, never a silent 0.
class SweepParams {
 public:
  SweepParams(Store& store, const SweepInfo& sweep);

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const std::map<std::string, std::string>& all() const { return values_; }
  // Required values: a missing one is an error naming the sweep and the key.
  std::string text(const std::string& key) const;
  std::int64_t integer(const std::string& key) const;
  double number(const std::string& key) const;
  bool flag(const std::string& key) const;  // stored as "1" or "0"
  std::optional<std::int64_t> optional_integer(const std::string& key) const;

  void set_text(const std::string& key, const std::string& value);
  void set_integer(const std::string& key, std::int64_t value);
  void set_number(const std::string& key, double value);  // fixed, 6 decimals (as sweeps have always stored it)
  void set_flag(const std::string& key, bool value);

 private:
  [[noreturn]] void malformed(const std::string& key, const char* expected) const;
  Store* store_;
  std::int64_t sweep_id_;
  std::string sweep_name_;
  std::map<std::string, std::string> values_;
};

// What every running sweep stores for --resume: where its seeds start, its data folder, the per-run time limit.
struct SweepRunSettings {
  std::int64_t first_seed = 0;
  std::string data;
  double timeout_s = 0;  // 0: none

  void save(SweepParams& params) const;
  static SweepRunSettings load(const SweepParams& params);
};

// ---- resuming ----

// The options given on `command`'s line (their first long names; "-- CMD" for the positional command).
std::vector<std::string> given_options(const CLI::App& command);
// With --resume: every given option that `applies` refuses is named in one error, "--resume: WHY, so OPTIONS
// cannot apply; INSTEAD".
void refuse_options_on_resume(const std::vector<std::string>& given,
                              const std::function<bool(const std::string&)>& applies, const std::string& why,
                              const std::string& instead);
// --resume ID|NAME: the stored sweep, which must be of `kind` (a sweep of another kind names the command that
// continues it); `db` names the database in the error.
SweepInfo find_sweep_to_resume(Store& store, const std::string& id_or_name, const std::string& kind,
                               const std::filesystem::path& db);
// --runs N with --resume: the sweep grows to N runs per arm (`arms` runs a seed); it never shrinks. 0: unchanged.
// Changes `sweep` only: run_sweep_plans stores the larger plan when the runs start.
void extend_planned_runs(Store& store, SweepInfo& sweep, int runs_per_arm, int arms);

// ---- planning and running ----

// One arm of a sweep as its runs are planned: record has one, unnamed (run ids NAME-seedS), compare two
// (NAME-ARM-seedS).
struct PlannedArm {
  std::string name;
  std::map<std::string, std::string> values;  // placeholders besides {seed}, {run_id}, {out}: {recipe}, {data}, ...
  std::vector<std::string> extra_args;        // appended after the template
  std::map<std::string, std::string> params;  // stored with each of its runs
  std::optional<std::int64_t> early_stop_step;
};
// The data folder of a command that uses it ({data}, as train_gpt's does) must exist before the first run: a missing
// one made every run fail, one by one, into a sweep of failed runs (exit 1). Slurm jobs read it on their nodes, so
// it is not checked here for them.
void check_data_folder(const std::vector<std::string>& argv_template, const std::string& data,
                       const LauncherSettings& launcher);

// One harness at a time runs a sweep: two `record --resume S` at once planned the same missing seeds and ran each
// twice, the second overwriting the first's outputs. The hold is an exclusive flock on `<runs dir>/sweep.lock`
// (holding the holder's pid), taken before the runs are planned and released when the object goes (or the process
// ends, however it ends); a second harness is refused with exit 2, naming the holder.
class SweepHold {
 public:
  static SweepHold take(const std::filesystem::path& run_root, const std::string& sweep_name);
  SweepHold(SweepHold&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  SweepHold& operator=(SweepHold&&) = delete;
  SweepHold(const SweepHold&) = delete;
  ~SweepHold();

 private:
  explicit SweepHold(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Seeds first_seed .. first_seed + runs - 1 must each be a seed >= 0 that a run is stored with (int64): checked
// before a sweep is created, so a seed range that wraps around never becomes a stored sweep.
void check_seed_range(std::int64_t first_seed, int runs);

// The runs still missing, seed by seed and arm by arm within a seed (ABAB...: drift hits every arm alike): every
// (arm, seed) without a stored run that was not killed.
std::vector<RunPlan> plan_missing_runs(Store& store, const SweepInfo& sweep,
                                       const std::vector<std::string>& argv_template,
                                       const std::vector<PlannedArm>& arms, std::int64_t first_seed, int runs_per_arm,
                                       const std::filesystem::path& run_root);

struct SweepExecution {
  int parallel = 1;
  double timeout_s = 0;  // 0: none
  int gpus = 0;          // per run; sizes CUDA_VISIBLE_DEVICES slices and Slurm jobs
  bool quiet = false;
  LauncherSettings launcher;
};
// What one call ran: the runner's result, and how many of its runs are still in spool files.
struct SweepCall {
  std::string command;  // "record" or "compare": names `harness COMMAND --resume SWEEP` in messages
  SweepRunResult ran;
  int spooled = 0;
};
// Runs `plans` through the sweep's launcher (local slots or Slurm jobs) with progress on stderr, stopping on
// SIGINT/SIGTERM (runs in flight are killed and stored as `killed`); every finished run is spooled, then stored.
// Runs still spooled because the database stayed locked get one more try; then what was not started (busy
// folders) or is still spooled is told on stderr.
SweepCall run_sweep_plans(Store& store, const SweepInfo& sweep, const std::vector<RunPlan>& plans,
                          const SweepExecution& execution, const std::filesystem::path& run_root,
                          const std::string& command);
// How a call ends: interrupted (kExitInterrupted, telling how to continue), runs left spooled (kExitSpooled: not a
// failed check, the verdict lacks runs the database did not take), else the command's `verdict`.
int sweep_exit_code(const SweepCall& call, const SweepInfo& sweep, int verdict);

}  // namespace gpt::harness
