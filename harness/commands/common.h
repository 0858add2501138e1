#pragma once
// What every `harness` subcommand shares: the database options and the exit codes.
//
// Exit codes: 0 success (for record/import: the record check passed), 1 the check failed (or, for other
// commands, a failure while working), 2 bad input or usage (unknown flag, missing file, locked or corrupt
// database, unknown sweep), 130 interrupted by SIGINT/SIGTERM (finished runs are stored; --resume continues).
#include <CLI/CLI.hpp>

#include <filesystem>
#include <string>

#include "harness/store/store.h"

namespace gpt::harness {

inline constexpr int kExitPass = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInterrupted = 130;

struct GlobalOptions {
  std::string db;              // --db (not given: $SPEEDRUN_DB or results/speedrun.db; given empty: an error)
  const CLI::Option* db_option = nullptr;
  int db_timeout_ms = 5000;    // --db-timeout
  int exit_code = kExitPass;   // set by the subcommand that ran
};

// Adds --db and --db-timeout to `app` (the top-level app: they are accepted before or after the subcommand).
void add_global_options(CLI::App& app, GlobalOptions& options);
// Opens the database. Reading commands (read_only) refuse a missing file instead of creating one; writing
// commands first store any run an earlier harness left in a spool file under `<db folder>/runs`.
Store open_store(const GlobalOptions& options, bool read_only = false);

// Folder beside the database for run outputs and reports: `<db folder>/runs`, `<db folder>/reports`.
std::filesystem::path results_dir(const GlobalOptions& options);

void add_record_command(CLI::App& app, GlobalOptions& options);
void add_import_command(CLI::App& app, GlobalOptions& options);
void add_query_command(CLI::App& app, GlobalOptions& options);

}  // namespace gpt::harness
