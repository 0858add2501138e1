#pragma once
// `harness compare`: candidate revision vs a baseline revision or named baseline, interleaved runs.
#include <CLI/CLI.hpp>

namespace gpt::harness::commands {
// Adds the `compare` subcommand; a failed comparison ends through CLI::RuntimeError(exit code).
void register_compare_command(CLI::App& app);
}  // namespace gpt::harness::commands
