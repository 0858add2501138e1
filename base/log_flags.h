#pragma once
// The logging flags every program takes: `--log-level LEVEL` and `--quiet` (= --log-level warn).
#include <string>

#include <CLI/CLI.hpp>

namespace gpt::log {

struct LogFlags {
  std::string level = "info";  // as given to --log-level
  bool quiet = false;          // --quiet
};

// Adds --log-level and --quiet to `app` (exclusive of each other). Each applies to the default logger as soon as
// it is parsed, before any subcommand's callback runs. A level outside kLevelNames is a CLI::ValidationError that
// names the flag and the allowed values.
void add_log_flags(CLI::App& app, LogFlags& flags);

}  // namespace gpt::log
