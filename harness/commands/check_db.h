#pragma once
#include <CLI/CLI.hpp>

#include "harness/commands/common.h"

namespace gpt::harness {

// `harness check-db`: SQLite's integrity check and every run's row checksum (Store::check_run_checksums), so a
// byte changed inside a stored row is found. Exit 0 when all is intact, 1 when anything differs.
void add_check_db_command(CLI::App& app, GlobalOptions& options);

}  // namespace gpt::harness
