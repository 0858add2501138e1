// The sweep lifecycle shared by `harness record` and `harness compare` (harness/commands/sweep_lifecycle.h): typed
// stored parameters, resuming, the run plan and how a call ends.
#include "harness/commands/sweep_lifecycle.h"

#include <gtest/gtest.h>

#include "base/log.h"
#include "harness/commands/common.h"
#include "tests/common/error_of.h"
#include "tests/harness/temp_dir.h"

namespace gpt::harness {
namespace {

using gpt::test::error_of;
using testing::TempDir;

class SweepLifecycle : public ::testing::Test {
 protected:
  SweepInfo new_sweep(const std::string& name, const std::string& kind = "record", int runs_planned = 3) {
    SweepInfo s;
    s.name = name;
    s.kind = kind;
    s.recipe = "tiny";
    s.runs_planned = runs_planned;
    s.id = store.create_sweep(s);
    return *store.find_sweep(name);
  }
  void add_run(const SweepInfo& sweep, const std::string& arm, std::int64_t seed, RunStatus status) {
    RunRecord r;
    r.sweep_id = sweep.id;
    r.arm = arm;
    r.seed = seed;
    r.run_id = sweep.name + "-" + arm + std::to_string(seed);
    r.status = status;
    store.add_run(r);
  }
  TempDir dir;
  Store store = Store::open(dir / "r.db");
};

TEST_F(SweepLifecycle, RunSettingsRoundTripInTheStoredTextForm) {
  const SweepInfo sweep = new_sweep("s");
  SweepParams params(store, sweep);
  SweepRunSettings{-3, "data/default", 12.5}.save(params);
  // The stored text is what sweeps have always held, so older harnesses and `harness report` read it alike.
  const auto stored = store.params(OwnerKind::sweep, sweep.id);
  EXPECT_EQ(stored.at("first_seed"), "-3");
  EXPECT_EQ(stored.at("data"), "data/default");
  EXPECT_EQ(stored.at("timeout_s"), "12.500000");
  const SweepRunSettings back = SweepRunSettings::load(SweepParams(store, sweep));
  EXPECT_EQ(back.first_seed, -3);
  EXPECT_EQ(back.data, "data/default");
  EXPECT_DOUBLE_EQ(back.timeout_s, 12.5);
}

TEST_F(SweepLifecycle, FlagsAndOptionalIntegers) {
  const SweepInfo sweep = new_sweep("s");
  SweepParams params(store, sweep);
  params.set_flag("track3", true);
  EXPECT_EQ(store.params(OwnerKind::sweep, sweep.id).at("track3"), "1");
  EXPECT_FALSE(params.optional_integer("early_stop_step").has_value());
  params.set_integer("early_stop_step", 1390);
  const SweepParams reread(store, sweep);
  EXPECT_TRUE(reread.flag("track3"));
  EXPECT_EQ(reread.optional_integer("early_stop_step"), 1390);
}

TEST_F(SweepLifecycle, MalformedStoredValuesNameTheSweepIdKeyAndValue) {
  const SweepInfo sweep = new_sweep("broken");
  store.set_param(OwnerKind::sweep, sweep.id, "first_seed", "zero");
  store.set_param(OwnerKind::sweep, sweep.id, "timeout_s", "12abc");  // stod would have read 12
  store.set_param(OwnerKind::sweep, sweep.id, "track3", "yes");
  store.set_param(OwnerKind::sweep, sweep.id, "early_stop_step", "");
  const SweepParams params(store, sweep);
  const std::string where = "sweep 'broken' (id " + std::to_string(sweep.id) + "): its stored parameter ";
  std::string e = error_of([&] { params.integer("first_seed"); });
  EXPECT_NE(e.find(where + "'first_seed' is 'zero', expected an integer"), std::string::npos) << e;
  e = error_of([&] { params.number("timeout_s"); });
  EXPECT_NE(e.find(where + "'timeout_s' is '12abc', expected a number"), std::string::npos) << e;
  e = error_of([&] { params.flag("track3"); });
  EXPECT_NE(e.find(where + "'track3' is 'yes', expected 1 or 0"), std::string::npos) << e;
  e = error_of([&] { params.optional_integer("early_stop_step"); });
  EXPECT_NE(e.find(where + "'early_stop_step' is '', expected an integer"), std::string::npos) << e;
  e = error_of([&] { SweepRunSettings::load(params); });
  EXPECT_NE(e.find("'first_seed'"), std::string::npos) << e;
}

TEST_F(SweepLifecycle, IntegerOutOfRangeIsMalformed) {
  const SweepInfo sweep = new_sweep("s");
  store.set_param(OwnerKind::sweep, sweep.id, "first_seed", "99999999999999999999");
  const std::string e = error_of([&] { SweepParams(store, sweep).integer("first_seed"); });
  EXPECT_NE(e.find("expected an integer"), std::string::npos) << e;
}

TEST_F(SweepLifecycle, MissingParameterNamesTheSweepAndKey) {
  const SweepInfo sweep = new_sweep("s");
  const std::string e = error_of([&] { SweepParams(store, sweep).text("data"); });
  EXPECT_NE(e.find("--resume: sweep 's' lacks its 'data' parameter"), std::string::npos) << e;
}

TEST_F(SweepLifecycle, FindSweepToResumeChecksExistenceAndKind) {
  new_sweep("rec", "record");
  new_sweep("imp", "import");
  EXPECT_EQ(find_sweep_to_resume(store, "rec", "record", dir / "r.db").name, "rec");
  std::string e = error_of([&] { find_sweep_to_resume(store, "nosuch", "compare", dir / "r.db"); });
  EXPECT_NE(e.find("--resume: no sweep 'nosuch' in '" + (dir / "r.db").string() + "'"), std::string::npos) << e;
  e = error_of([&] { find_sweep_to_resume(store, "rec", "compare", dir / "r.db"); });
  EXPECT_NE(e.find("sweep 'rec' is a record sweep, not a compare sweep; `harness record --resume` continues it"),
            std::string::npos)
      << e;
  e = error_of([&] { find_sweep_to_resume(store, "imp", "record", dir / "r.db"); });
  EXPECT_NE(e.find("is a import sweep, not a record sweep"), std::string::npos) << e;
  EXPECT_EQ(e.find("continues it"), std::string::npos) << e;  // an import is never resumed
}

TEST_F(SweepLifecycle, ExtendPlannedRunsGrowsNeverShrinks) {
  SweepInfo sweep = new_sweep("cmp", "compare", 4);  // 2 runs per arm
  extend_planned_runs(store, sweep, 0, 2);           // --runs not given
  EXPECT_EQ(sweep.runs_planned, 4);
  extend_planned_runs(store, sweep, 3, 2);
  EXPECT_EQ(sweep.runs_planned, 6);
  // Only in memory: run_sweep_plans stores the plan once the runs start, so a refused resume changes nothing.
  EXPECT_EQ(store.find_sweep("cmp")->runs_planned, 4);
  const std::string e = error_of([&] { extend_planned_runs(store, sweep, 2, 2); });
  EXPECT_NE(e.find("--runs 2 with --resume: sweep 'cmp' already has 3 runs per arm; --runs can only extend it"),
            std::string::npos)
      << e;
  SweepInfo record = new_sweep("rec", "record", 3);
  const std::string r = error_of([&] { extend_planned_runs(store, record, 1, 1); });
  EXPECT_NE(r.find("sweep 'rec' already has 3 planned runs; --runs can only extend it"), std::string::npos) << r;
}

TEST_F(SweepLifecycle, RefusedOptionsAreNamedTogether) {
  const auto only_runs = [](const std::string& option) { return option == "--runs"; };
  EXPECT_NO_THROW(refuse_options_on_resume({"--runs"}, only_runs, "why", "instead"));
  const std::string e = error_of([&] {
    refuse_options_on_resume({"--alpha", "--runs", "--target"}, only_runs, "it keeps X", "do Y");
  });
  EXPECT_NE(e.find("--resume: it keeps X, so --alpha, --target cannot apply; do Y"), std::string::npos) << e;
}

TEST_F(SweepLifecycle, TrainerCommandTemplate) {
  EXPECT_EQ(trainer_command_template("{bin}", 0, "", {}),
            (std::vector<std::string>{"{bin}", "--recipe", "{recipe}", "--data", "{data}", "--seed", "{seed}",
                                      "--run-id", "{run_id}", "--out", "{out}"}));
  const auto full = trainer_command_template("/t", 8, "cuda", {"a=1", "b=2"});
  const std::vector<std::string> tail(full.begin() + 11, full.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"--gpus", "{gpus}", "--backend", "cuda", "--set", "a=1", "--set", "b=2"}));
}

TEST_F(SweepLifecycle, PlanSkipsFinishedRunsAndRerunsKilledOnesInterleaved) {
  const SweepInfo sweep = new_sweep("cmp", "compare", 6);
  add_run(sweep, "baseline", 10, RunStatus::ok);
  add_run(sweep, "candidate", 10, RunStatus::killed);  // killed: planned again
  add_run(sweep, "candidate", 11, RunStatus::failed);  // failed is finished: not re-run
  PlannedArm baseline{"baseline", {{"recipe", "tiny"}}, {}, {{"arm_recipe", "tiny"}}, std::nullopt};
  PlannedArm candidate{"candidate", {{"recipe", "mini"}}, {"--set", "x=1"}, {}, std::int64_t{7}};
  const std::vector<std::string> argv = {"{bin}", "{recipe}", "{seed}", "{run_id}", "{out}"};
  const auto plans = plan_missing_runs(store, sweep, argv, {baseline, candidate}, 10, 3, dir / "runs");
  std::vector<std::string> ids;
  for (const auto& p : plans) ids.push_back(p.run_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"cmp-candidate-seed10", "cmp-baseline-seed11", "cmp-baseline-seed12",
                                           "cmp-candidate-seed12"}));
  const RunPlan& c = plans[0];
  EXPECT_EQ(c.arm, "candidate");
  EXPECT_EQ(c.seed, 10);
  EXPECT_EQ(c.out_dir, dir / "runs" / "cmp-candidate-seed10");
  EXPECT_EQ(c.log_path, c.out_dir / "console.log");
  EXPECT_EQ(c.argv, (std::vector<std::string>{"{bin}", "mini", "10", "cmp-candidate-seed10", c.out_dir.string(),
                                              "--set", "x=1"}));
  EXPECT_EQ(c.early_stop_step, 7);
  EXPECT_EQ(plans[1].params.at("arm_recipe"), "tiny");
  EXPECT_FALSE(plans[1].early_stop_step.has_value());
}

TEST_F(SweepLifecycle, OneUnnamedArmGivesRecordRunIds) {
  const SweepInfo sweep = new_sweep("rec");
  add_run(sweep, "", 1, RunStatus::ok);
  const auto plans = plan_missing_runs(store, sweep, {"t", "{seed}"}, {PlannedArm{}}, 0, 3, dir / "runs");
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].run_id, "rec-seed0");
  EXPECT_EQ(plans[1].run_id, "rec-seed2");
  EXPECT_EQ(plans[1].argv, (std::vector<std::string>{"t", "2"}));
}

TEST_F(SweepLifecycle, ExitCodeInterruptedBeforeSpooledBeforeVerdict) {
  const SweepInfo sweep = new_sweep("rec");
  SweepCall call;
  call.command = "record";
  EXPECT_EQ(sweep_exit_code(call, sweep, kExitFail), kExitFail);
  call.spooled = 1;
  EXPECT_EQ(sweep_exit_code(call, sweep, kExitPass), kExitSpooled);
  call.ran.interrupted = true;
  gpt::log::start("harness");  // the programs' stderr logger, as harness main() makes it
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(sweep_exit_code(call, sweep, kExitPass), kExitInterrupted);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("continue with `harness record --resume rec`"), std::string::npos) << err;
}

}  // namespace
}  // namespace gpt::harness
