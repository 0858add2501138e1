#pragma once
// `harness nightly`: build, benchmark, smoke-train, store, and flag regressions (non-zero exit).
#include <CLI/CLI.hpp>

namespace gpt::harness::commands {
// Adds the `nightly` subcommand; regressions end through CLI::RuntimeError(1).
void register_nightly_command(CLI::App& app);
}  // namespace gpt::harness::commands
