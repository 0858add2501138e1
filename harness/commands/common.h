#pragma once
// What every `harness` subcommand shares: the database options and the exit codes.
//
// Exit codes: 0 success (for record/import: the record check passed), 1 the check failed (or, for other
// commands, a failure while working), 2 bad input or usage (unknown flag, missing file, locked or corrupt
// database, unknown sweep), 4 finished runs are kept in spool files because the database stayed busy (nothing is
// lost; `--resume` or any later command stores them; the check was not decided on all runs), 130 interrupted by
// SIGINT/SIGTERM (finished runs are stored; --resume continues). train_gpt's own 3 (diverged) is a run's status.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/log_flags.h"
#include "harness/launcher/run_launcher.h"
#include "harness/record/sweep_runner.h"
#include "harness/store/store.h"

namespace gpt::harness {

inline constexpr int kExitPass = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitSpooled = 4;
inline constexpr int kExitInterrupted = 130;

struct GlobalOptions {
  std::string db;              // --db (not given: $SPEEDRUN_DB or results/speedrun.db; given empty: an error)
  const CLI::Option* db_option = nullptr;
  int db_timeout_ms = 5000;    // --db-timeout
  int exit_code = kExitPass;   // set by the subcommand that ran
  gpt::log::LogFlags log;      // --log-level, --quiet (diagnostics on stderr)
};

// An error for the user: the message without the source locations (" [harness/x.cpp:54]") the checks append,
// which only `--log-level debug` (or trace) keeps: pass keep_source_locations = gpt::log::enabled(debug).
std::string user_error_message(const std::string& what, bool keep_source_locations);
std::string user_error_message(const std::string& what, const char*) = delete;  // a level name is no flag

// Adds --db, --db-timeout, --log-level and --quiet to `app` (the top-level app: they are accepted before or after
// the subcommand; a subcommand's own --quiet, where it has one, takes that flag after it).
void add_global_options(CLI::App& app, GlobalOptions& options);
// A command's own --quiet (record, compare): as the global --quiet, only warnings and errors from here on.
void quiet_progress_if(bool quiet);
// Opens the database. Reading commands (read_only) refuse a missing file instead of creating one; writing
// commands first store any run an earlier harness left in a spool file under `<db folder>/runs`.
Store open_store(const GlobalOptions& options, bool read_only = false);

// Folder beside the database for run outputs and reports: `<db folder>/runs`, `<db folder>/reports`.
std::filesystem::path results_dir(const GlobalOptions& options);
// `<db folder>/runs/<sweep>` and `<db folder>/reports/<sweep>`, created without following a symbolic link
// below the database's folder; the sweep name must be one plain path component (safe_names.h), also for sweeps
// stored before names were checked.
std::filesystem::path sweep_runs_dir(const GlobalOptions& options, const std::string& sweep_name);
std::filesystem::path sweep_reports_dir(const GlobalOptions& options, const std::string& sweep_name);
// --name of record, compare and import: a sweep name, checked by CLI11 with the flag named in the error.
CLI::Option* add_sweep_name_option(CLI::App& command, std::string& name, const std::string& description);

// ---- shared by the commands that run sweeps (record, compare) ----

// The corpus a recipe trains on when --data is not given (data/default for tiny, data/fineweb10B otherwise).
std::string default_data_dir(const std::string& recipe);
// train_gpt beside the running harness binary.
std::filesystem::path default_trainer();
// Replaces each {key} of `values` in `text`.
std::string substitute_placeholders(std::string text, const std::map<std::string, std::string>& values);
// UTC time as YYYYMMDD-HHMMSS, for default sweep names.
std::string utc_timestamp();

struct SweepExecution {
  int parallel = 1;
  double timeout_s = 0;  // 0: none
  int gpus = 0;          // per run; sizes CUDA_VISIBLE_DEVICES slices and Slurm jobs
  bool quiet = false;
  LauncherSettings launcher;
};
// Runs `plans` through the sweep's launcher (local slots or Slurm jobs) with progress on stderr, stopping on
// SIGINT/SIGTERM (runs in flight are killed and stored as `killed`); every finished run is spooled, then stored.
// Runs still spooled because the database stayed locked get one more try before returning.
SweepRunResult execute_sweep_plans(Store& store, const SweepInfo& sweep, const std::vector<RunPlan>& plans,
                                   const SweepExecution& execution, const std::filesystem::path& run_root);
// What to tell the user after execute_sweep_plans: runs not started (busy folders), runs left spooled. Returns
// how many of `plans` are still in their spool files (the caller then exits with kExitSpooled).
int report_unstored_runs(const SweepRunResult& ran, const std::vector<RunPlan>& plans, const std::string& resume_hint);

void add_record_command(CLI::App& app, GlobalOptions& options);
void add_import_command(CLI::App& app, GlobalOptions& options);
void add_query_command(CLI::App& app, GlobalOptions& options);

}  // namespace gpt::harness
