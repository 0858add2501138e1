#pragma once
#include <CLI/CLI.hpp>

#include "harness/commands/common.h"

namespace gpt::harness {

// `harness plan`: runs needed for a record attempt to reach the wanted power (see harness/stats/power.h).
void add_plan_command(CLI::App& app, GlobalOptions& options);

}  // namespace gpt::harness
