#pragma once
#include <CLI/CLI.hpp>

#include "harness/commands/common.h"

namespace gpt::harness {

// `harness site --out DIR`: the database as a static history dashboard (harness/report/site.h).
void add_site_command(CLI::App& app, GlobalOptions& options);

}  // namespace gpt::harness
