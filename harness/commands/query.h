#pragma once
// `harness query`: sweeps, runs, benchmark history, environments, or any read-only SQL over the results database.
#include <CLI/CLI.hpp>

#include "harness/commands/common.h"

namespace gpt::harness {

void add_query_command(CLI::App& app, GlobalOptions& options);

}  // namespace gpt::harness
