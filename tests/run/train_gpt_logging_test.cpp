// train_gpt's diagnostics (base/log.h): --log-level and --quiet steer what it says on stderr; the run log and its
// speedrun step lines on stdout (the harness contract) stay the same at every level. The runs start
// bin/standin_train_gpt, train_gpt's program on the stand-in model, which names itself so.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "run_test_util.h"

namespace gpt {
namespace {

using test::Outcome;
using test::RunScratch;
using ::testing::HasSubstr;
using ::testing::Not;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The step lines of a short run (short_schedule(): 8 steps, validation every 4).
void expect_step_lines(const std::string& text) {
  EXPECT_THAT(text, HasSubstr("step:0/8 val_loss:"));
  EXPECT_THAT(text, HasSubstr("step:8/8 val_loss:"));
  EXPECT_THAT(text, HasSubstr("step:8/8 train_time:"));
  EXPECT_THAT(text, HasSubstr("peak memory allocated: "));
}

TEST(TrainGptLogging, InfoLevelAnnouncesTheRunOnStderr) {
  RunScratch scratch;
  const Outcome o = test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "loud"));
  ASSERT_EQ(o.exit_code, 0) << o.stderr_text;
  EXPECT_THAT(o.stderr_text, HasSubstr("standin_train_gpt: run loud: recipe tiny, 8 step(s) on 1 rank(s); log "));
  EXPECT_THAT(o.stderr_text, HasSubstr("standin_train_gpt: run loud finished after 8 step(s); summary "));
  EXPECT_THAT(o.stderr_text, Not(HasSubstr("debug:")));
  const std::string out = read_text(scratch.root() / "stdout.txt");
  expect_step_lines(out);
  EXPECT_THAT(out, Not(HasSubstr("run loud:")));  // diagnostics stay off stdout
}

TEST(TrainGptLogging, QuietHidesTheRunAnnouncementButNotTheStepLines) {
  RunScratch scratch;
  const Outcome o = test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "hush") + " --quiet");
  ASSERT_EQ(o.exit_code, 0) << o.stderr_text;
  EXPECT_THAT(o.stderr_text, Not(HasSubstr("run hush")));
  expect_step_lines(read_text(scratch.root() / "stdout.txt"));
  expect_step_lines(read_text(scratch.out() / "hush.txt"));
}

TEST(TrainGptLogging, DebugLevelShowsTheThreadCount) {
  RunScratch scratch;
  const Outcome o =
      test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "verbose") + " --log-level debug");
  ASSERT_EQ(o.exit_code, 0) << o.stderr_text;
  EXPECT_THAT(o.stderr_text, HasSubstr("standin_train_gpt: debug: CPU threads: 1 (--threads)"));
  EXPECT_THAT(o.stderr_text, HasSubstr("standin_train_gpt: run verbose: recipe tiny"));
  expect_step_lines(read_text(scratch.root() / "stdout.txt"));
}

// A bad level is a usage error (exit 2) of one line that names the flag and the levels; no run starts.
TEST(TrainGptLogging, UnknownLogLevelIsAUsageError) {
  RunScratch scratch;
  const Outcome o =
      test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "bad") + " --log-level verbose");
  EXPECT_EQ(o.exit_code, 2) << o.stderr_text;
  EXPECT_THAT(o.stderr_text, HasSubstr("standin_train_gpt: --log-level: 'verbose' is not a log level; expected one of "
                                       "trace, debug, info, warn, error, off"));
  EXPECT_EQ(std::count(o.stderr_text.begin(), o.stderr_text.end(), '\n'), 1) << o.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(scratch.out() / "bad.txt"));

  const Outcome both = test::run_program(scratch, "standin_train_gpt",
                                         test::short_run_args(scratch, "bad") + " --quiet --log-level debug");
  EXPECT_EQ(both.exit_code, 2) << both.stderr_text;
  EXPECT_THAT(both.stderr_text, HasSubstr("--log-level excludes --quiet"));
}

}  // namespace
}  // namespace gpt
