#pragma once
// `harness nightly`: build, run the `bench`-labelled Google Benchmark programs and a training smoke run,
// store everything, and flag confirmed regressions (exit 1); `--ingest FILE|FOLDER...` stores benchmark JSON
// made elsewhere (e.g. results/benchmarks), one night per file in date order, skipping nights already stored,
// and runs the same detection and report.
#include <CLI/CLI.hpp>

#include "harness/commands/common.h"

namespace gpt::harness {
// Adds the `nightly` subcommand (the database comes from the global --db); a confirmed regression ends
// through CLI::RuntimeError(1).
void add_nightly_command(CLI::App& app, GlobalOptions& options);
}  // namespace gpt::harness
