// The shared checks of a run's result: the log parser, the summary reader, record's harvest and the store
// refuse negative losses, impossible step counts and summaries that contradict their log.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/logparse/logparse.h"
#include "harness/logparse/run_summary.h"
#include "harness/record/harvest.h"
#include "harness/report/sweep_report.h"
#include "harness/store/run_checks.h"
#include "harness/store/sqlite.h"
#include "tests/harness/temp_dir.h"

namespace gpt::harness {
namespace {

using testing::TempDir;

constexpr const char* kLog =
    "step:0/26 val_loss:10.8253 train_time:0ms step_avg:0ms\n"
    "step:26/26 val_loss:9.0815 train_time:900ms step_avg:34.6ms\n";

RunPlan plan_in(const TempDir& dir, const std::string& log, const std::string& run_id = "r1") {
  RunPlan plan;
  plan.seed = 1;
  plan.run_id = run_id;
  plan.out_dir = dir.path();
  plan.log_path = dir.write("console.log", log);
  return plan;
}

ExitInfo exited_ok() {
  ExitInfo e;
  e.exited = true;
  e.exit_code = 0;
  return e;
}

TEST(RunChecks, NegativeLossesAndStepsBeyondTheTotalAreProblems) {
  EXPECT_TRUE(loss_problem(-6.92).has_value());
  EXPECT_FALSE(loss_problem(0.0).has_value());
  EXPECT_FALSE(loss_problem(std::numeric_limits<double>::infinity()).has_value());  // divergence, judged elsewhere
  EXPECT_TRUE(steps_problem(27, 26).has_value());
  EXPECT_TRUE(steps_problem(std::nullopt, -1).has_value());
  EXPECT_TRUE(steps_problem(-1, std::nullopt).has_value());
  EXPECT_FALSE(steps_problem(26, 26).has_value());
}

TEST(RunChecksLog, NegativeFinalLossIsInvalidNotComplete) {
  const auto runs = parse_log(
      "step:0/26 val_loss:10.8 train_time:0ms step_avg:0ms\n"
      "step:26/26 val_loss:-6.92 train_time:9ms step_avg:1ms\n");
  EXPECT_EQ(runs.at(0).outcome, LogOutcome::invalid);
  EXPECT_NE(runs[0].reason.find("negative"), std::string::npos) << runs[0].reason;
  EXPECT_EQ(record_from_log(runs[0], "x.txt").status, RunStatus::failed);
}

TEST(RunChecksLog, DifferentDuplicateFinalLinesAreInvalidAndEqualOnesFine) {
  const std::string head = "step:0/26 val_loss:10.8 train_time:0ms step_avg:0ms\n";
  auto runs = parse_log(head +
                        "step:26/26 val_loss:6.9618 train_time:9ms step_avg:1ms\n"
                        "step:26/26 val_loss:5.0000 train_time:9ms step_avg:1ms\n");
  EXPECT_EQ(runs.at(0).outcome, LogOutcome::invalid);
  EXPECT_NE(runs[0].reason.find("two different final validations"), std::string::npos) << runs[0].reason;
  runs = parse_log(head +
                   "step:26/26 val_loss:6.9618 train_time:9ms step_avg:1ms\n"
                   "step:26/26 val_loss:6.9618 train_time:9ms step_avg:1ms\n");
  EXPECT_EQ(runs.at(0).outcome, LogOutcome::complete);
}

TEST(RunChecksLog, ALineCutAnywhereBeforeItsTimeIsNeverAResult) {
  const std::string head = "step:0/26 val_loss:10.8 train_time:0ms step_avg:0ms\n";
  for (const char* cut : {"step:26/26 val_loss:6.96", "step:26/26 val_loss:6.9618", "step:26/26 val_loss:6.9618 ",
                          "step:26/26 val_loss:6.9618 train_time:9", "step:26/26 val_loss:6.9618 train_time:9ms"}) {
    const auto runs = parse_log(head + cut);
    EXPECT_EQ(runs.at(0).outcome, LogOutcome::incomplete) << "'" << cut << "'";
  }
  const auto whole = parse_log(head + "step:26/26 val_loss:6.9618 train_time:9ms step_avg:0.3");
  EXPECT_EQ(whole.at(0).outcome, LogOutcome::complete);
}

TEST(RunChecksSummary, NegativeLossesCountsAndStepsBeyondTheTotalAreRefused) {
  for (const char* text :
       {R"({"final_val_loss":-6.92})", R"({"total_steps":-1})", R"({"steps":-3})", R"({"steps":30,"total_steps":26})",
        R"({"tokens":-1})", R"({"world_size":0})", R"({"val_history":[{"step":0,"val_loss":-1.0}]})"}) {
    EXPECT_THROW(parse_run_summary(text, "s.json"), gpt::Error) << text;
  }
  EXPECT_NO_THROW(parse_run_summary(R"({"final_val_loss":"inf","steps":3,"total_steps":26})", "s.json"));
}

TEST(RunChecksHarvest, DivergedSummaryBesideACompleteLogIsFailedWithTheReason) {
  TempDir dir;
  dir.write("r1.json", R"({"run_id":"r1","status":"diverged","final_val_loss":null,"steps":26,"total_steps":26})");
  const RunRecord r = harvest_run(plan_in(dir, kLog), exited_ok(), RunEnd::exited);
  EXPECT_EQ(r.status, RunStatus::failed);
  EXPECT_NE(r.reason.find("diverged"), std::string::npos) << r.reason;
}

TEST(RunChecksHarvest, AnotherRunsSummaryDoesNotOverrideTheLog) {
  TempDir dir;
  dir.write("r1.json", R"({"run_id":"tiny-seed1","final_val_loss":6.9618,"steps":26,"total_steps":26})");
  RunRecord r = harvest_run(plan_in(dir, kLog), exited_ok(), RunEnd::exited);
  EXPECT_EQ(r.status, RunStatus::failed);
  EXPECT_NE(r.reason.find("of run 'tiny-seed1'"), std::string::npos) << r.reason;
  dir.write("r1.json", R"({"final_val_loss":6.9618,"steps":26,"total_steps":26})");  // no run id: the loss differs
  r = harvest_run(plan_in(dir, kLog), exited_ok(), RunEnd::exited);
  EXPECT_EQ(r.status, RunStatus::failed);
  EXPECT_NE(r.reason.find("differs from the log's final validation (val_loss 9.0815"), std::string::npos) << r.reason;
}

TEST(RunChecksHarvest, SummaryLossThatRoundsToTheLogsIsAccepted) {
  TempDir dir;
  dir.write("r1.json", R"({"run_id":"r1","final_val_loss":9.081493,"steps":26,"total_steps":26})");
  const RunRecord r = harvest_run(plan_in(dir, kLog), exited_ok(), RunEnd::exited);
  EXPECT_EQ(r.status, RunStatus::ok) << r.reason;
  EXPECT_DOUBLE_EQ(*r.final_val_loss, 9.081493);
}

TEST(RunChecksHarvest, InfSummaryBesideAFiniteLogIsFailed) {
  TempDir dir;
  dir.write("r1.json", R"({"run_id":"r1","final_val_loss":"inf","steps":26,"total_steps":26})");
  const RunRecord r = harvest_run(plan_in(dir, kLog), exited_ok(), RunEnd::exited);
  EXPECT_EQ(r.status, RunStatus::failed);
}

TEST(RunChecksStore, UnusableOkRowIsReadAsFailedAndTheReportStillBuilds) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  SweepInfo s;
  s.name = "s";
  s.kind = "record";
  s.runs_planned = 3;
  s.id = store.create_sweep(s);
  for (int seed = 0; seed < 3; ++seed) {
    RunRecord r;
    r.sweep_id = s.id;
    r.seed = seed;
    r.run_id = "r" + std::to_string(seed);
    r.status = RunStatus::ok;
    r.final_val_loss = 3.2 + 0.01 * seed;
    store.add_run(r);
  }
  // A row as an older harness stored it (or a byte edited since): ok with an infinite loss.
  store.db().exec("UPDATE runs SET final_val_loss = 9e999 WHERE seed = 1");
  const auto runs = store.runs(s.id);
  EXPECT_EQ(runs.at(1).status, RunStatus::failed);
  EXPECT_NE(runs[1].reason.find("final val loss is inf"), std::string::npos) << runs[1].reason;
  const SweepReport rep = build_sweep_report(store, *store.find_sweep("s"), ReportOptions{3.28, 0.01, false});
  EXPECT_EQ(rep.arms.at(0).ok.size(), 2u);
  EXPECT_EQ(rep.arms[0].not_ok.size(), 1u);
}

TEST(RunChecksStore, NegativeLossIsStoredFailed) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  SweepInfo s;
  s.name = "s";
  s.kind = "import";
  s.id = store.create_sweep(s);
  RunRecord r;
  r.sweep_id = s.id;
  r.run_id = "a";
  r.status = RunStatus::ok;
  r.final_val_loss = -6.92;
  store.add_run(r);
  auto stored = store.db().prepare("SELECT status, reason FROM runs");
  ASSERT_TRUE(stored.step());
  EXPECT_EQ(stored.column_text(0), "failed");
  EXPECT_NE(stored.column_text(1).find("negative"), std::string::npos) << stored.column_text(1);
}

}  // namespace
}  // namespace gpt::harness
