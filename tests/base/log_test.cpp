// The programs' logging (base/log.h, base/log_flags.h): level names, the --log-level/--quiet flags and the format.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "base/log.h"
#include "base/log_flags.h"

namespace gpt::log {
namespace {

using ::testing::HasSubstr;

TEST(LogLevel, ParsesEachDocumentedName) {
  EXPECT_EQ(parse_level("trace"), spdlog::level::trace);
  EXPECT_EQ(parse_level("debug"), spdlog::level::debug);
  EXPECT_EQ(parse_level("info"), spdlog::level::info);
  EXPECT_EQ(parse_level("warn"), spdlog::level::warn);
  EXPECT_EQ(parse_level("error"), spdlog::level::err);
  EXPECT_EQ(parse_level("off"), spdlog::level::off);
}

TEST(LogLevel, RejectsOtherNames) {
  EXPECT_FALSE(parse_level("verbose").has_value());
  EXPECT_FALSE(parse_level("INFO").has_value());
  EXPECT_FALSE(parse_level("warning").has_value());  // spdlog's own name for warn is not one of the flag's
  EXPECT_FALSE(parse_level("err").has_value());
  EXPECT_FALSE(parse_level("").has_value());
}

// Each test starts from a default logger at info writing into `text`, and leaves one behind.
class LogFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_default_logger(make_logger("prog", std::make_shared<spdlog::sinks::ostream_sink_mt>(text)));
  }
  void TearDown() override { start("tests"); }

  // Parses `args` (after the program name) with the log flags; returns the flags.
  LogFlags parse(std::vector<std::string> args) {
    CLI::App app{"test"};
    LogFlags flags;
    add_log_flags(app, flags);
    std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
    app.parse(args);
    return flags;
  }

  std::ostringstream text;
};

TEST_F(LogFlagsTest, DefaultIsInfo) {
  const LogFlags flags = parse({});
  EXPECT_EQ(flags.level, "info");
  EXPECT_FALSE(flags.quiet);
  EXPECT_TRUE(enabled(spdlog::level::info));
  EXPECT_FALSE(enabled(spdlog::level::debug));
}

TEST_F(LogFlagsTest, LogLevelSetsTheDefaultLoggersLevel) {
  EXPECT_EQ(parse({"--log-level", "debug"}).level, "debug");
  EXPECT_TRUE(enabled(spdlog::level::debug));
  EXPECT_FALSE(enabled(spdlog::level::trace));
  parse({"--log-level=error"});
  EXPECT_FALSE(enabled(spdlog::level::warn));
  EXPECT_TRUE(enabled(spdlog::level::err));
  parse({"--log-level", "off"});
  EXPECT_FALSE(enabled(spdlog::level::err));
  parse({"--log-level", "trace"});
  EXPECT_TRUE(enabled(spdlog::level::trace));
}

TEST_F(LogFlagsTest, UnknownLevelNamesTheFlagAndTheAllowedValues) {
  try {
    parse({"--log-level", "verbose"});
    FAIL() << "--log-level verbose was accepted";
  } catch (const CLI::ValidationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--log-level"));
    EXPECT_THAT(e.what(),
                HasSubstr("'verbose' is not a log level; expected one of trace, debug, info, warn, error, off"));
  }
  EXPECT_TRUE(enabled(spdlog::level::info));  // unchanged
  EXPECT_FALSE(enabled(spdlog::level::debug));
}

TEST_F(LogFlagsTest, QuietIsWarn) {
  EXPECT_TRUE(parse({"--quiet"}).quiet);
  EXPECT_FALSE(enabled(spdlog::level::info));
  EXPECT_TRUE(enabled(spdlog::level::warn));
}

TEST_F(LogFlagsTest, QuietAndLogLevelExcludeEachOther) {
  EXPECT_THROW(parse({"--quiet", "--log-level", "debug"}), CLI::ExcludesError);
}

TEST_F(LogFlagsTest, FormatNamesTheProgramAndEveryLevelButInfo) {
  parse({"--log-level", "trace"});
  spdlog::trace("t {}", 1);
  spdlog::debug("d");
  spdlog::info("sweep {} \"{}\": {} run(s) to go", 3, "s", 2);
  spdlog::warn("w");
  spdlog::error("e");
  EXPECT_EQ(
      text.str(),
      "prog: trace: t 1\nprog: debug: d\nprog: sweep 3 \"s\": 2 run(s) to go\nprog: warning: w\nprog: error: e\n");
}

TEST_F(LogFlagsTest, QuietDropsInfoButKeepsWarnings) {
  parse({"--quiet"});
  spdlog::info("progress");
  spdlog::warn("kept");
  EXPECT_EQ(text.str(), "prog: warning: kept\n");
}

}  // namespace
}  // namespace gpt::log
