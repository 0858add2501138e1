#pragma once
// `harness record`: N seeded runs of the trainer (or of any command) and the record check of their mean final val
// loss against the target (exit 0 passed, 1 failed, 2 usage, 4 runs left spooled, 130 interrupted).
#include <CLI/CLI.hpp>

#include "harness/commands/common.h"

namespace gpt::harness {

void add_record_command(CLI::App& app, GlobalOptions& options);

}  // namespace gpt::harness
