#pragma once
// `harness import`: published speedrun logs (files or folders, one arm per folder) stored as a sweep, then its record
// report.
#include <CLI/CLI.hpp>

#include "harness/commands/common.h"

namespace gpt::harness {

void add_import_command(CLI::App& app, GlobalOptions& options);

}  // namespace gpt::harness
