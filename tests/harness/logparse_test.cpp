#include "harness/logparse/logparse.h"

#include <gtest/gtest.h>

#include <cmath>

#include "harness/logparse/run_summary.h"
#include "base/check.h"

namespace gpt::harness {
namespace {

constexpr const char* kCleanRun =
    "step:0/1390 val_loss:10.8258 train_time:0ms step_avg:0.02ms\n"
    "step:1/1390 train_time:55ms step_avg:55.00ms\n"
    "step:125/1390 val_loss:4.3012 train_time:7000ms step_avg:56.00ms\n"
    "step:1390/1390 val_loss:3.2775 train_time:79532ms step_avg:57.22ms\n"
    "peak memory allocated: 30220 MiB reserved: 38672 MiB\n";

TEST(StepLine, ValidationLine) {
  auto s = parse_step_line("step:1390/1390 val_loss:3.2775 train_time:79532ms step_avg:57.22ms");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->step, 1390);
  EXPECT_EQ(s->total, 1390);
  EXPECT_DOUBLE_EQ(*s->val_loss, 3.2775);
  EXPECT_DOUBLE_EQ(*s->train_time_ms, 79532);
  EXPECT_FALSE(s->train_loss);
  EXPECT_FALSE(s->time_in_seconds);
}

TEST(StepLine, TrainingLineHasNoValLoss) {
  auto s = parse_step_line("step:7/1390 train_time:400ms step_avg:57.14ms");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->step, 7);
  EXPECT_FALSE(s->val_loss);
  EXPECT_DOUBLE_EQ(*s->train_time_ms, 400);
}

TEST(StepLine, TrainLossIsRead) {
  auto s = parse_step_line("step:7/1390 train_loss:4.123456 train_time:400ms step_avg:57.14ms");
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(*s->train_loss, 4.123456);
}

TEST(StepLine, SixDecimalLoss) {
  EXPECT_DOUBLE_EQ(*parse_step_line("step:10/10 val_loss:3.279812 train_time:5ms step_avg:0.5ms")->val_loss, 3.279812);
}

TEST(StepLine, ExtraFieldsAnywhere) {
  auto s = parse_step_line("lr:0.0300 step:20/100 tokens:1048576 val_loss:3.5 mem:12GiB train_time:9ms x:y");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->step, 20);
  EXPECT_DOUBLE_EQ(*s->val_loss, 3.5);
  EXPECT_DOUBLE_EQ(*s->train_time_ms, 9);
}

TEST(StepLine, Track3TimeInSeconds) {
  auto s = parse_step_line("step:3000/3000 val_loss:3.2790 train_time:1234.567s step_avg:411.52ms");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->time_in_seconds);
  EXPECT_NEAR(*s->train_time_ms, 1234567.0, 1e-6);
}

TEST(StepLine, NanStepAverageIsTolerated) {
  auto s = parse_step_line("step:0/1390 val_loss:10.8258 train_time:0ms step_avg:nanms");
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(*s->val_loss, 10.8258);
}

TEST(StepLine, NanLossParsesAsNan) {
  auto s = parse_step_line("step:50/100 val_loss:nan train_time:10ms step_avg:0.2ms");
  ASSERT_TRUE(s);
  EXPECT_TRUE(std::isnan(*s->val_loss));
}

TEST(StepLine, RejectsNonStepLines) {
  EXPECT_FALSE(parse_step_line(""));
  EXPECT_FALSE(parse_step_line("Resetting Model"));
  EXPECT_FALSE(parse_step_line("peak memory allocated: 30220 MiB reserved: 38672 MiB"));
  EXPECT_FALSE(parse_step_line("    print0(f\"step:{step}/{train_steps} val_loss:{val_loss:.4f}\")"));
  EXPECT_FALSE(parse_step_line("step:{step}/{total} val_loss:{x:.4f}"));
  EXPECT_FALSE(parse_step_line("step:5 val_loss:3.3"));              // no total
  EXPECT_FALSE(parse_step_line("step:5/10 train_time:fast"));        // garbage time
  EXPECT_FALSE(parse_step_line("val_loss:3.3 train_time:5ms"));      // no step field
  EXPECT_FALSE(parse_step_line("step:5/10 val_loss:3.3 and more"));  // stray words
}

// A step line whose numbers cannot be read as the trainer meant them is a step line with a problem, not "no step
// line": the log is failed naming it (it was "without a final validation" or "no step lines").
TEST(StepLine, UnreadableNumbersAreAProblemOfAStepLine) {
  for (const char* line : {"step:10/10 val_loss:1e309 train_time:9ms", "step:10/10 val_loss:3,2771 train_time:9ms",
                           "step:10/10 val_loss:0x1p1 train_time:9ms", "step:5/10 val_loss:abc"}) {
    const auto s = parse_step_line(line);
    ASSERT_TRUE(s) << line;
    EXPECT_NE(s->problem.find("is not a number"), std::string::npos) << line << ": " << s->problem;
    EXPECT_FALSE(s->val_loss) << line;
  }
  EXPECT_NE(parse_step_line("step:0/0 val_loss:3.3")->problem.find("expected a step >= 0 of a total >= 1"),
            std::string::npos);
  EXPECT_NE(parse_step_line("step:150/100 val_loss:3.3")->problem.find("step 150 is beyond the total step count 100"),
            std::string::npos);
  EXPECT_TRUE(parse_step_line("step:100/100 val_loss:3.3")->problem.empty());
}

TEST(ParseLog, AStepLineWithAnUnreadableLossFailsTheRunNamingIt) {
  for (const std::string bad : {"1e309", "3,2771", "0x1p1"}) {
    const auto logs = parse_log("step:0/10 val_loss:10.8 train_time:0ms step_avg:0ms\nstep:10/10 val_loss:" + bad +
                                " train_time:90ms step_avg:9ms\n");
    ASSERT_EQ(logs.size(), 1u) << bad;
    EXPECT_EQ(logs[0].outcome, LogOutcome::invalid) << bad;
    EXPECT_NE(logs[0].reason.find("line 2: val_loss '" + bad + "' is not a number"), std::string::npos)
        << logs[0].reason;
  }
}

TEST(ParseLog, AZeroTotalOrAStepBeyondTheTotalFailsTheRun) {
  const auto zero = parse_log("step:0/0 val_loss:10.8 train_time:0ms step_avg:0ms\n");
  ASSERT_EQ(zero.size(), 1u);
  EXPECT_EQ(zero[0].outcome, LogOutcome::invalid);  // was "no step lines found"
  EXPECT_NE(zero[0].reason.find("step:0/0"), std::string::npos) << zero[0].reason;
  const auto beyond = parse_log(
      "step:0/100 val_loss:10.8 train_time:0ms step_avg:0ms\n"
      "step:150/100 val_loss:3.2 train_time:90ms step_avg:0.6ms\n");
  ASSERT_EQ(beyond.size(), 1u);
  EXPECT_EQ(beyond[0].outcome, LogOutcome::invalid);  // was incomplete
  EXPECT_NE(beyond[0].reason.find("step 150 is beyond the total step count 100"), std::string::npos)
      << beyond[0].reason;
}

TEST(PeakMemory, ParsesAllocatedAndReserved) {
  auto m = parse_peak_memory_line("peak memory allocated: 30220 MiB reserved: 38672 MiB");
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->first, 30220);
  EXPECT_DOUBLE_EQ(m->second, 38672);
  EXPECT_FALSE(parse_peak_memory_line("peak memory allocated: 30220 MiB reserved: 386"));
}

TEST(ParseLog, CleanRunIsComplete) {
  auto runs = parse_log(kCleanRun);
  ASSERT_EQ(runs.size(), 1u);
  const auto& r = runs[0];
  EXPECT_EQ(r.outcome, LogOutcome::complete);
  EXPECT_TRUE(r.reason.empty());
  EXPECT_DOUBLE_EQ(*r.final_val_loss, 3.2775);
  EXPECT_DOUBLE_EQ(*r.final_train_time_ms, 79532);
  EXPECT_EQ(*r.final_step, 1390);
  EXPECT_EQ(*r.total_steps, 1390);
  ASSERT_EQ(r.val_points.size(), 3u);
  EXPECT_EQ(r.val_points[1].step, 125);
  EXPECT_DOUBLE_EQ(*r.peak_memory_mib, 30220);
  EXPECT_DOUBLE_EQ(*r.reserved_memory_mib, 38672);
  EXPECT_EQ(r.step_lines, 4u);
  EXPECT_EQ(r.first_line, 1u);
  EXPECT_EQ(r.last_line, 4u);
}

TEST(ParseLog, SourceCodeHeaderAndSeparatorsAreSkipped) {
  std::string text =
      "import os\n"
      "def main():\n"
      "    print0(f\"step:{step}/{args.num_iterations} val_loss:{val_loss:.4f} train_time:{t:.0f}ms\")\n"
      "step:1/2 this line is prose inside a docstring\n" +
      std::string(100, '=') + "\nRunning Python 3.12\n" + kCleanRun;
  auto runs = parse_log(text);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, LogOutcome::complete);
  EXPECT_DOUBLE_EQ(*runs[0].final_val_loss, 3.2775);
  EXPECT_EQ(runs[0].first_line, 7u);
}

TEST(ParseLog, LastValAtTotalWinsOverLaterLines) {
  auto runs = parse_log(
      "step:100/100 val_loss:3.30 train_time:10ms step_avg:0.1ms\n"
      "step:100/100 train_time:11ms step_avg:0.11ms\n");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, LogOutcome::complete);
  EXPECT_DOUBLE_EQ(*runs[0].final_val_loss, 3.30);
}

TEST(ParseLog, FixedEarlyStopIsFinalOnlyWhenDeclared) {
  const std::string text =
      "step:0/1750 val_loss:10.8 train_time:0ms step_avg:nanms\n"
      "step:1000/1750 train_time:50000ms step_avg:50.00ms\n"
      "step:1000/1750 val_loss:3.2790 train_time:50010ms step_avg:50.01ms\n";
  EXPECT_EQ(parse_log(text).at(0).outcome, LogOutcome::incomplete);
  auto runs = parse_log(text, LogParseOptions{1000});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, LogOutcome::complete);
  EXPECT_DOUBLE_EQ(*runs[0].final_val_loss, 3.2790);
  EXPECT_EQ(*runs[0].final_step, 1000);
  EXPECT_EQ(*runs[0].total_steps, 1750);
}

TEST(ParseLog, StopAfterTrainingLineIsIncomplete) {
  auto runs = parse_log(
      "step:0/1390 val_loss:10.8 train_time:0ms step_avg:0.0ms\n"
      "step:700/1390 train_time:40000ms step_avg:57.1ms\n");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, LogOutcome::incomplete);
  EXPECT_FALSE(runs[0].final_val_loss);
  EXPECT_EQ(*runs[0].final_step, 700);
  EXPECT_NE(runs[0].reason.find("stopped at step 700/1390"), std::string::npos) << runs[0].reason;
}

TEST(ParseLog, NoStepLinesIsIncompleteWithReason) {
  auto runs = parse_log("Traceback (most recent call last):\n  File \"x.py\"\nRuntimeError: CUDA OOM\n");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, LogOutcome::incomplete);
  EXPECT_NE(runs[0].reason.find("no step lines"), std::string::npos);
  EXPECT_TRUE(parse_log("").at(0).reason.find("no step lines") != std::string::npos);
}

TEST(ParseLog, GarbageBytesAreIgnored) {
  std::string text = std::string("\x01\x02\xff\xfe garbage\n", 13) + kCleanRun + "\x7f\x80 more junk\n";
  auto runs = parse_log(text);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, LogOutcome::complete);
}

TEST(ParseLog, NanFinalLossIsDiverged) {
  auto runs = parse_log(
      "step:0/100 val_loss:10.8 train_time:0ms step_avg:0ms\n"
      "step:100/100 val_loss:nan train_time:900ms step_avg:9ms\n");
  EXPECT_EQ(runs.at(0).outcome, LogOutcome::diverged);
  EXPECT_NE(runs[0].reason.find("nan"), std::string::npos);
}

TEST(ParseLog, NanTrainLossThenStopIsDiverged) {
  auto runs = parse_log(
      "step:0/100 val_loss:10.8 train_time:0ms step_avg:0ms\n"
      "step:37/100 train_loss:nan train_time:300ms step_avg:8.1ms\n");
  EXPECT_EQ(runs.at(0).outcome, LogOutcome::diverged);
  EXPECT_NE(runs[0].reason.find("step 37"), std::string::npos) << runs[0].reason;
}

TEST(ParseLog, SeveralRunsInOneFile) {
  std::string text = std::string(kCleanRun) + std::string(kCleanRun);
  auto runs = parse_log(text);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].first_line, 6u);
  EXPECT_EQ(runs[1].outcome, LogOutcome::complete);
}

TEST(ParseLog, SeparatorSplitsRunsThatCrashedAtStepZero) {
  auto runs = parse_log(
      "step:0/10 val_loss:10.8 train_time:0ms step_avg:0ms\n" + std::string(100, '=') +
      "\nstep:0/10 val_loss:10.8 train_time:0ms step_avg:0ms\nstep:10/10 val_loss:3.3 train_time:5ms step_avg:0.5ms\n");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].outcome, LogOutcome::incomplete);  // a validation at step 0 is not a final result
  EXPECT_EQ(*runs[0].last_step, 0);
  EXPECT_DOUBLE_EQ(*runs[1].final_val_loss, 3.3);
}

// A real log cut after an intermediate validation (issue: it was stored as ok and entered the statistics).
TEST(ParseLog, CutAtAnIntermediateValidationIsIncomplete) {
  const std::string text =
      "step:2125/2315 val_loss:3.3120 train_time:140000ms step_avg:65.9ms\n"
      "step:2249/2315 train_time:148000ms step_avg:65.8ms\n"
      "step:2250/2315 val_loss:3.2905 train_time:148100ms step_avg:65.8ms\n";
  auto runs = parse_log(text);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, LogOutcome::incomplete);
  EXPECT_FALSE(runs[0].final_val_loss);
  EXPECT_EQ(*runs[0].last_step, 2250);
  EXPECT_NE(runs[0].reason.find("step 2250/2315"), std::string::npos) << runs[0].reason;
}

TEST(ParseLog, DeclaredEarlyStopStepIsFinal) {
  const std::string text =
      "step:2249/2315 train_time:148000ms step_avg:65.8ms\n"
      "step:2250/2315 val_loss:3.2905 train_time:148100ms step_avg:65.8ms\n";
  auto accepted = parse_log(text, LogParseOptions{2250});
  EXPECT_EQ(accepted[0].outcome, LogOutcome::complete);
  EXPECT_DOUBLE_EQ(*accepted[0].final_val_loss, 3.2905);
  auto other = parse_log(text, LogParseOptions{2000});  // a different declared stop does not match
  EXPECT_EQ(other[0].outcome, LogOutcome::incomplete);
}

// The trainer prints training lines without a loss and ends a diverged run with `diverged: <why>`.
TEST(ParseLog, TrainerDivergedLineMarksTheRunDiverged) {
  const std::string text =
      "step:0/100 val_loss:10.8 train_time:0ms step_avg:0ms\n"
      "step:37/100 train_time:400ms step_avg:10.8ms\n"
      "diverged: non-finite training loss at step 37\n"
      "peak memory allocated: 10 MiB reserved: 20 MiB\n";
  auto runs = parse_log(text);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].outcome, LogOutcome::diverged);
  EXPECT_NE(runs[0].reason.find("non-finite training loss at step 37"), std::string::npos) << runs[0].reason;
}

TEST(ParseLog, ChangedTotalStartsANewRun) {
  auto runs = parse_log(
      "step:10/10 val_loss:3.5 train_time:5ms step_avg:0.5ms\n"
      "step:20/20 val_loss:3.4 train_time:9ms step_avg:0.5ms\n");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(*runs[1].total_steps, 20);
}

TEST(ParseLog, EndsMidLineAfterFinalValue) {
  // The cut field is step_avg: the final loss and time are intact.
  auto runs =
      parse_log("step:0/10 val_loss:10.8 train_time:0ms step_avg:0ms\nstep:10/10 val_loss:3.3 train_time:5ms step_a");
  EXPECT_EQ(runs.at(0).outcome, LogOutcome::complete);
  EXPECT_DOUBLE_EQ(*runs[0].final_val_loss, 3.3);
}

TEST(ParseLog, EndsMidLineInsideTheLoss) {
  // "3.2" may be the start of "3.2775": it must not be taken as the result.
  auto runs = parse_log("step:0/10 val_loss:10.8 train_time:0ms step_avg:0ms\nstep:10/10 val_loss:3.2");
  EXPECT_EQ(runs.at(0).outcome, LogOutcome::incomplete);
  EXPECT_NE(runs[0].reason.find("mid-line"), std::string::npos) << runs[0].reason;
}

TEST(ParseLog, WindowsLineEndings) {
  auto runs = parse_log("step:10/10 val_loss:3.3 train_time:5ms step_avg:0.5ms\r\n");
  EXPECT_EQ(runs.at(0).outcome, LogOutcome::complete);
  EXPECT_DOUBLE_EQ(*runs[0].final_val_loss, 3.3);
}

TEST(ParseLog, Track3LogIsConvertedToMilliseconds) {
  auto runs = parse_log("step:3000/3000 val_loss:3.2790 train_time:1234.500s step_avg:411.50ms\n");
  EXPECT_TRUE(runs.at(0).time_in_seconds);
  EXPECT_DOUBLE_EQ(*runs[0].final_train_time_ms, 1234500.0);
}

TEST(ParseLogFile, MissingFileNamesThePath) {
  try {
    parse_log_file("/nonexistent/dir/run.txt");
    FAIL() << "expected an error";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/run.txt"), std::string::npos);
  }
}

TEST(RunSummaryJson, ReadsTheContractFields) {
  auto s = parse_run_summary(R"({"schema_version":1,"run_id":"r1","seed":3,"recipe":{"name":"tiny","hash":"x"},
    "status":"ok","final_val_loss":3.28,"train_time_ms":1500.5,"steps":26,"tokens":28000,
    "val_history":[{"step":0,"val_loss":10.9,"train_time_ms":0},{"step":26,"val_loss":3.28}],
    "peak_memory":{"allocated_mib":12,"reserved_mib":20},"world_size":1,"backend":"cpu",
    "environment":{"gpu":"none","cpu":"Xeon","git_commit":"abc","git_dirty":true}})",
                             "ID.json");
  EXPECT_EQ(s.run_id, "r1");
  EXPECT_EQ(s.seed, 3);
  EXPECT_EQ(s.recipe, "tiny");
  EXPECT_DOUBLE_EQ(*s.final_val_loss, 3.28);
  EXPECT_EQ(s.val_history.size(), 2u);
  EXPECT_FALSE(s.val_history[1].train_time_ms);
  EXPECT_DOUBLE_EQ(*s.peak_memory_mib, 12);
  ASSERT_TRUE(s.environment);
  EXPECT_EQ(s.environment->cpu_model, "Xeon");
  EXPECT_TRUE(s.environment->git_dirty);
}

TEST(RunSummaryJson, TrainDataPassesAndTheirErrors) {
  const auto s = parse_run_summary(R"({"train_data":{"cycled":true,"passes":6}})", "a");
  EXPECT_TRUE(s.train_data_cycled);
  EXPECT_EQ(s.train_data_passes, 6);
  EXPECT_FALSE(parse_run_summary("{}", "a").train_data_cycled);
  EXPECT_THROW(parse_run_summary(R"({"train_data":3})", "a"), gpt::Error);
  EXPECT_THROW(parse_run_summary(R"({"train_data":{"cycled":"yes"}})", "a"), gpt::Error);
}

TEST(RunSummaryJson, NanLossAsNullOrString) {
  EXPECT_TRUE(std::isnan(*parse_run_summary(R"({"final_val_loss":null})", "a").final_val_loss));
  EXPECT_TRUE(std::isnan(*parse_run_summary(R"({"final_val_loss":"nan"})", "a").final_val_loss));
  EXPECT_FALSE(parse_run_summary("{}", "a").final_val_loss);
}

TEST(RunSummaryJson, BadInputNamesFileAndField) {
  auto message = [](const std::string& text) {
    try {
      parse_run_summary(text, "out/r1.json");
    } catch (const gpt::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message("{not json").find("out/r1.json' is not valid JSON"), std::string::npos);
  EXPECT_NE(message("[1,2]").find("should hold a JSON object"), std::string::npos);
  EXPECT_NE(message(R"({"steps":"many"})").find("field 'steps' should be an integer"), std::string::npos);
  EXPECT_NE(message(R"({"val_history":{}})").find("field 'val_history'"), std::string::npos);
}

}  // namespace
}  // namespace gpt::harness
