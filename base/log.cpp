#include "base/log.h"

#include <array>
#include <utility>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace gpt::log {

namespace {

// "%*": the level as a prefix ("warning: "), empty at info, so progress lines read as plain sentences while
// warnings and errors say what they are.
class LevelTag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string_view tag = tag_of(msg.level);
    dest.append(tag.data(), tag.data() + tag.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<LevelTag>(); }

 private:
  static std::string_view tag_of(spdlog::level::level_enum level) {
    switch (level) {
      case spdlog::level::trace:
        return "trace: ";
      case spdlog::level::debug:
        return "debug: ";
      case spdlog::level::warn:
        return "warning: ";
      case spdlog::level::err:
        return "error: ";
      case spdlog::level::critical:
        return "critical: ";
      default:
        return "";
    }
  }
};

}  // namespace

std::optional<spdlog::level::level_enum> parse_level(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, spdlog::level::level_enum>, 6> kLevels = {{
      {"trace", spdlog::level::trace},
      {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},
      {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},
      {"off", spdlog::level::off},
  }};
  for (const auto& [level_name, level] : kLevels) {
    if (name == level_name) return level;
  }
  return std::nullopt;
}

std::shared_ptr<spdlog::logger> make_logger(const std::string& program, spdlog::sink_ptr sink) {
  auto logger = std::make_shared<spdlog::logger>(program, std::move(sink));
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<LevelTag>('*').set_pattern("%n: %*%v");
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::trace);
  return logger;
}

void start(const std::string& program) {
  spdlog::set_default_logger(make_logger(program, std::make_shared<spdlog::sinks::stderr_sink_mt>()));
}

void set_level(spdlog::level::level_enum level) { spdlog::default_logger_raw()->set_level(level); }

bool enabled(spdlog::level::level_enum level) { return spdlog::default_logger_raw()->should_log(level); }

}  // namespace gpt::log
