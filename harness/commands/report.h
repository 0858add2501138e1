#pragma once
#include <CLI/CLI.hpp>

#include "harness/commands/common.h"

namespace gpt::harness {

// `harness report --sweep ID`: writes a stored sweep's HTML (and Markdown/JSON) reports.
void add_report_command(CLI::App& app, GlobalOptions& options);

}  // namespace gpt::harness
