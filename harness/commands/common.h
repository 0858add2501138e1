#pragma once
// What every `harness` subcommand shares: the database options and the exit codes.
//
// Exit codes: 0 success (for record/import: the record check passed), 1 the check failed (or, for other
// commands, a failure while working), 2 bad input or usage (unknown flag, missing file, locked or corrupt
// database, unknown sweep), 4 finished runs are kept in spool files because the database stayed busy (nothing is
// lost; `--resume` or any later command stores them; the check was not decided on all runs), 130 interrupted by
// SIGINT/SIGTERM (finished runs are stored; --resume continues). train_gpt's own 3 (diverged) is a run's status.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/log_flags.h"
#include "base/user_error.h"
#include "harness/record/run_launcher.h"
#include "harness/record/sweep_runner.h"
#include "harness/store/store.h"

namespace gpt::harness {

inline constexpr int kExitPass = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitSpooled = 4;
inline constexpr int kExitInterrupted = 130;

struct GlobalOptions {
  std::string db;  // --db (not given: $SPEEDRUN_DB or results/speedrun.db; given empty: an error)
  const CLI::Option* db_option = nullptr;
  int db_timeout_ms = 5000;   // --db-timeout
  int exit_code = kExitPass;  // set by the subcommand that ran
  gpt::log::LogFlags log;     // --log-level, --quiet (diagnostics on stderr)
  // The words after the first `--` when the subcommand takes a command there (record, compare); see
  // harness_arguments.
  std::optional<std::vector<std::string>> command_after_dashes;
};

// The first `--` on the command line always ends the harness's options. Left to CLI11, an option that takes an
// optional or repeated value eats a `--` right after its value (`--fail-if-slower 5 -- CMD ...`), and the command's
// own flags are then read as the harness's. For a subcommand with a `command` (record, compare) the words after
// the first `--` go to options.command_after_dashes and the returned argv (for CLI11) ends before the `--`; for
// any other, the argv is returned whole, so that CLI11 refuses the stray words as before.
std::vector<const char*> harness_arguments(CLI::App& app, GlobalOptions& options, int argc, const char* const* argv);
// In the callback of a command that takes one: appends the command after `--` to `command` (after any words CLI11
// gave it without a `--`) and names it in `given` ("-- CMD", as given_options does).
void adopt_command_after_dashes(const GlobalOptions& options, std::vector<std::string>& command,
                                std::vector<std::string>& given);

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
// Option checks whose messages name what is expected in plain figures. CLI::Range lets NaN through (every comparison
// with NaN is false) and prints its bounds with std::to_string (1e-12 as 0.000000, DBL_MAX as 309 digits).
//   finite_in: a finite number in [lo, hi];  whole_in: a whole number in [lo, hi].
CLI::Validator finite_in(double lo, double hi);
CLI::Validator whole_in(std::int64_t lo, std::int64_t hi);

// Bounds of the options that size a sweep or wait for a run: beyond them a value is a typo, not a plan (a
// sweep of 2^31 runs reserves its plan before the first run; a timeout of 1e300 s is no limit but overflows clocks).
inline constexpr std::int64_t kMaxRuns = 100000;
inline constexpr double kMaxTimeoutS = 1e7;  // about 116 days
inline constexpr double kMaxTargetLoss = 1e6;

// --name of record, compare and import: a sweep name, checked by CLI11 with the flag named in the error.
CLI::Option* add_sweep_name_option(CLI::App& command, std::string& name, const std::string& description);

}  // namespace gpt::harness
