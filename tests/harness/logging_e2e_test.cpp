// The harness's diagnostics (base/log.h) end to end: --quiet and --log-level steer the progress and detail on
// stderr, never the command's output on stdout (reports, JSON, query results).
#include <gmock/gmock.h>
#include <nlohmann/json.hpp>

#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The end-to-end fixture with two logs of one arm to import: enough runs for the record check (exit 0).
class LoggingE2E : public RecordE2E {
 protected:
  void write_two_logs() {
    const std::string first = "step:0/10 val_loss:10.8 train_time:0ms step_avg:0ms\n";
    dir.write("logs/a/x.txt", first + "step:10/10 val_loss:3.2500 train_time:900ms step_avg:90ms\n");
    dir.write("logs/a/y.txt", first + "step:10/10 val_loss:3.2600 train_time:910ms step_avg:91ms\n");
  }
};

TEST_F(LoggingE2E, ImportSaysWhatItImportedAtInfoLevel) {
  write_two_logs();
  const Result r = harness({"import", (dir / "logs").string(), "--name", "loud", "--target", "3.5"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("harness: imported 2 run(s) from 2 file(s) into sweep 1 \"loud\"\n"));
}

TEST_F(LoggingE2E, QuietHidesImportProgressButNotTheReport) {
  write_two_logs();
  const Result r =
      harness({"--quiet", "import", (dir / "logs").string(), "--name", "hush", "--format", "json", "--target", "3.5"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("imported")));
  const auto doc = nlohmann::json::parse(r.output);  // nothing but the report
  EXPECT_EQ(doc["arms"][0]["n_ok"], 2);
}

TEST_F(LoggingE2E, GlobalQuietHidesSweepProgress) {
  std::vector<std::string> args = {"--quiet", "record", "--runs", "2", "--name", "sweep", "--target", "3.28", "--"};
  for (auto& a : synthetic({"--mean", "3.2"})) args.push_back(a);
  const Result quiet = harness(args);
  ASSERT_EQ(quiet.code, 0) << quiet.output;
  EXPECT_THAT(quiet.output, Not(HasSubstr("run(s) to go")));
  EXPECT_THAT(quiet.output, HasSubstr("report: "));  // the result on stdout

  const Result loud = harness({"record", "--resume", "sweep", "--runs", "3"});
  ASSERT_EQ(loud.code, 0) << loud.output;
  EXPECT_THAT(loud.output, HasSubstr("harness: sweep \"sweep\" extended from 2 to 3 runs\n"));
  EXPECT_THAT(loud.output, HasSubstr("harness: sweep 1 \"sweep\": 1 run(s) to go of 3, outputs in "));

  // record's own --quiet (after the command name) is the global one: no progress, no notes.
  const Result hushed = harness({"record", "--resume", "sweep", "--runs", "4", "--quiet"});
  ASSERT_EQ(hushed.code, 0) << hushed.output;
  EXPECT_THAT(hushed.output, Not(HasSubstr("extended from")));
  EXPECT_THAT(hushed.output, Not(HasSubstr("run(s) to go")));
  EXPECT_THAT(hushed.output, HasSubstr("report: "));
}

TEST_F(LoggingE2E, DebugLevelNamesTheDatabase) {
  write_two_logs();
  ASSERT_EQ(harness({"--quiet", "import", (dir / "logs").string(), "--name", "s", "--target", "3.5"}).code, 0);
  const Result debug = harness({"--log-level", "debug", "query", "sweeps"});
  ASSERT_EQ(debug.code, 0) << debug.output;
  EXPECT_THAT(debug.output, HasSubstr("harness: debug: database " + db().string() + " (read-only, "));
  const Result info = harness({"query", "sweeps"});  // the level may also follow the subcommand
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_THAT(info.output, Not(HasSubstr("debug:")));
  const Result after = harness({"query", "sweeps", "--log-level", "debug"});
  EXPECT_THAT(after.output, HasSubstr("harness: debug: database "));
}

TEST_F(LoggingE2E, UnknownLogLevelIsAUsageErrorNamingTheLevels) {
  const Result r = harness({"--log-level", "verbose", "query", "sweeps"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("--log-level: 'verbose' is not a log level; expected one of trace, debug, info, warn, "
                        "error, off"));
  const Result both = harness({"--quiet", "--log-level", "debug", "query", "sweeps"});
  EXPECT_EQ(both.code, 2) << both.output;
  EXPECT_THAT(both.output, HasSubstr("--log-level excludes --quiet"));
}

}  // namespace
}  // namespace gpt::harness
