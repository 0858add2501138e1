#pragma once
// `harness compare`: candidate revision vs a baseline revision or named baseline, interleaved runs.
#include <CLI/CLI.hpp>

#include "harness/commands/common.h"

namespace gpt::harness {
// Adds the `compare` subcommand; its exit code (0 done, 1 too slow or undecidable, 2 usage, 4 runs left spooled,
// 130 interrupted) goes to options.exit_code.
void add_compare_command(CLI::App& app, GlobalOptions& options);
}  // namespace gpt::harness
