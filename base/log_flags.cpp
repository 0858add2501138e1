#include "base/log_flags.h"

#include "base/log.h"

namespace gpt::log {

void add_log_flags(CLI::App& app, LogFlags& flags) {
  const CLI::Validator known_level(
      [](std::string& value) -> std::string {
        if (parse_level(value)) return {};
        return "'" + value + "' is not a log level; expected one of " + std::string(kLevelNames);
      },
      "LEVEL", "log level");
  CLI::Option* level = app.add_option_function<std::string>(
                              "--log-level",
                              [&flags](const std::string& value) {
                                flags.level = value;
                                set_level(*parse_level(value));
                              },
                              "diagnostics on stderr: " + std::string(kLevelNames) +
                                  " (default info; debug also names where in the source an error was raised)")
                           ->check(known_level)
                           ->configurable(false);
  app.add_flag_callback(
         "--quiet",
         [&flags] {
           flags.quiet = true;
           set_level(spdlog::level::warn);
         },
         "only warnings and errors on stderr (= --log-level warn)")
      ->excludes(level)
      ->configurable(false);
}

}  // namespace gpt::log
