#pragma once
// Leveled diagnostics of the programs (train_gpt, harness): one stderr logger, spdlog's default, so any layer
// above base/ logs with spdlog::info/warn/debug(...). Diagnostics only: the run log, the speedrun step lines and
// machine-readable output keep their own streams. Kernels do not log (hot paths).
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/logger.h>
#include <spdlog/sinks/sink.h>

namespace gpt::log {

// The names `--log-level` accepts, in order of verbosity, as an error message lists them.
inline constexpr std::string_view kLevelNames = "trace, debug, info, warn, error, off";

// The level named `name` (one of kLevelNames, exactly), or nothing.
std::optional<spdlog::level::level_enum> parse_level(std::string_view name);

// A logger named `program` writing to `sink` in the programs' format: "program: message" at info (the progress
// lines users read), "program: warning: message" / "program: debug: message" etc. at the other levels.
std::shared_ptr<spdlog::logger> make_logger(const std::string& program, spdlog::sink_ptr sink);

// Makes a stderr logger for `program` spdlog's default logger, at level info, flushing every line (a killed
// process keeps what it said).
void start(const std::string& program);

// Sets the default logger's level.
void set_level(spdlog::level::level_enum level);

// Whether the default logger writes messages of `level` (e.g. debug-only detail in an error message).
bool enabled(spdlog::level::level_enum level);

}  // namespace gpt::log
