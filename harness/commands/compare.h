#pragma once
// `harness compare`: candidate revision vs a baseline revision or named baseline, interleaved runs.
#include <CLI/CLI.hpp>

#include "harness/commands/common.h"

namespace gpt::harness::commands {
// Adds the `compare` subcommand; its exit code (0 done, 1 too slow or undecidable, 2 usage, 130 interrupted)
// goes to global.exit_code.
void register_compare_command(CLI::App& app, GlobalOptions& global);
}  // namespace gpt::harness::commands
