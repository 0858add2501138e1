// Option checks before any work: a value that is NaN, infinite or beyond what the option can mean is refused with
// exit 2 and a message that names the flag and the range in plain figures, and nothing is stored.
#include <chrono>
#include <thread>

#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

class OptionLimits : public RecordE2E {
 protected:
  // A refused option: exit 2, the flag and `expected` in the output, no sweep stored, no 309-digit DBL_MAX.
  void expect_refused(const Result& r, const std::string& flag, const std::string& expected) {
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find(flag), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("179769313486231570"), std::string::npos) << r.output;
    if (std::filesystem::exists(db())) {
      Store store = Store::open(db());
      EXPECT_TRUE(store.sweeps().empty()) << r.output;
    }
  }
};

TEST_F(OptionLimits, RecordRefusesANotANumberAlpha) {
  expect_refused(record(2, {}, {"--alpha", "nan"}), "--alpha",
                 "expected a finite number in [1e-12, 0.999999], got 'nan'");
}

TEST_F(OptionLimits, RecordRefusesANotANumberTarget) {
  expect_refused(record(2, {}, {"--target", "nan"}), "--target", "expected a finite number in [0, 1e+06]");
}

// An infinite target made a sweep whose report could never be written.
TEST_F(OptionLimits, RecordRefusesAnInfiniteTarget) {
  expect_refused(record(2, {}, {"--target", "inf"}), "--target", "got 'inf'");
}

TEST_F(OptionLimits, RecordRefusesANotANumberTimeout) {
  expect_refused(record(2, {}, {"--timeout", "nan"}), "--timeout", "expected a finite number in [0, 1e+07]");
}

TEST_F(OptionLimits, RecordRefusesAnAstronomicalTimeout) {
  expect_refused(record(2, {}, {"--timeout", "1e300"}), "--timeout", "got '1e300'");
}

// 2^31 - 1 runs reserved their plan (860 MB) before the first run.
TEST_F(OptionLimits, RecordRefusesRunsBeyondTheLimitInPlainFigures) {
  expect_refused(harness({"record", "--runs", "2147483647", "--target", "3.28", "--", "true"}), "--runs",
                 "expected a whole number in [1, 100000], got '2147483647'");
}

TEST_F(OptionLimits, RecordRefusesANegativeSeed) {
  expect_refused(record(2, {}, {"--first-seed=-1"}), "--first-seed", "got '-1'");
}

// The second seed wrapped around to -9223372036854775808 and was stored.
TEST_F(OptionLimits, RecordRefusesASeedRangeThatWrapsAround) {
  expect_refused(record(2, {}, {"--first-seed", "9223372036854775807"}),
                 "--first-seed 9223372036854775807 with --runs 2", "the last seed would be beyond 9223372036854775807");
}

TEST_F(OptionLimits, TheLargestSeedRangeThatFitsIsAccepted) {
  const Result r = record(1, {}, {"--first-seed", "9223372036854775807"});
  EXPECT_NE(r.code, 2) << r.output;
  ASSERT_EQ(runs().size(), 1u);
  EXPECT_EQ(runs()[0].seed, 9223372036854775807);
}

TEST_F(OptionLimits, CompareRefusesANotANumberAlphaAndTarget) {
  const std::vector<std::string> base = {"compare", "--baseline", "a", "--candidate", "b", "--runs", "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return harness(args);
  };
  expect_refused(with({"--alpha", "nan"}), "--alpha", "got 'nan'");
  expect_refused(with({"--target=-inf"}), "--target", "got '-inf'");
  expect_refused(with({"--timeout", "nan"}), "--timeout", "got 'nan'");
  expect_refused(with({"--first-seed=-3"}), "--first-seed", "got '-3'");
}

TEST_F(OptionLimits, ImportAndPlanRefuseANotANumberAlpha) {
  dir.write("logs/a.txt", "step:10/10 val_loss:3.2 train_time:900ms step_avg:90ms\n");
  expect_refused(harness({"import", (dir / "logs").string(), "--alpha", "nan"}), "--alpha", "got 'nan'");
  expect_refused(harness({"import", (dir / "logs").string(), "--target", "nan"}), "--target", "got 'nan'");
  expect_refused(harness({"plan", "--mean", "3.27", "--std", "nan"}), "--std", "got 'nan'");
  expect_refused(harness({"plan", "--mean", "3.27", "--std", "0.01", "--alpha", "nan"}), "--alpha", "got 'nan'");
}

// A --name that exists was silently renamed `same-2`.
TEST_F(OptionLimits, AnExplicitNameThatExistsIsRefused) {
  const Result first = record(2, {});
  ASSERT_TRUE(first.code == 0 || first.code == 1) << first.output;
  const Result again = record(2, {});
  EXPECT_EQ(again.code, 2) << again.output;
  EXPECT_NE(again.output.find("--name: a sweep named 'sweep' already exists"), std::string::npos) << again.output;
  Store store = Store::open(db());
  EXPECT_EQ(store.sweeps().size(), 1u);
  EXPECT_FALSE(store.find_sweep("sweep-2").has_value());
}

}  // namespace
}  // namespace gpt::harness

namespace gpt::harness {
namespace {

// Two `record --resume S` at once ran the same seeds twice, the second overwriting the first's outputs.
TEST_F(RecordE2E, OneHarnessAtATimeRunsASweep) {
  ASSERT_LE(record(1, {}).code, 1);
  const auto lock = dir / "runs" / "sweep" / "sweep.lock";
  std::filesystem::remove(lock);  // left by the first call: its reappearance says the resume holds the sweep
  // The resumed runs are slow (the stored command; SYNTH_STEP_SLEEP_MS reaches the trainer through the environment).
  Process first = start({"record", "--resume", "sweep", "--runs", "3"}, {{"SYNTH_STEP_SLEEP_MS", "100"}});
  for (int i = 0; i < 200 && (!std::filesystem::exists(lock) || std::filesystem::file_size(lock) == 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Process second_process = Process::start(LaunchSpec{
      {kBin + "harness", "--db", db().string(), "record", "--resume", "sweep", "--runs", "3"}, dir / "second.txt", {}});
  const ExitInfo second = second_process.wait();
  const std::string second_output = read_file(dir / "second.txt");
  const Result done = finish(std::move(first));
  EXPECT_LE(done.code, 1) << done.output;
  EXPECT_TRUE(second.exited && second.exit_code == 2) << second_output;
  EXPECT_NE(second_output.find("sweep 'sweep' is being run by another harness (pid "), std::string::npos)
      << second_output;
  EXPECT_EQ(runs().size(), 3u);  // each seed once
}

}  // namespace
}  // namespace gpt::harness

namespace gpt::harness {
namespace {

// `plan --sweep` of a sweep stored without a target planned against 3.28 without saying so.
TEST_F(RecordE2E, PlanAsksForATargetTheSweepDoesNotHave) {
  {
    Store store = Store::open(db());
    SweepInfo sweep;
    sweep.name = "untargeted";
    sweep.kind = "compare";
    sweep.id = store.create_sweep(sweep);
    for (int seed = 0; seed < 3; ++seed) {
      RunRecord r;
      r.sweep_id = sweep.id;
      r.seed = seed;
      r.run_id = "run" + std::to_string(seed);
      r.status = RunStatus::ok;
      r.final_val_loss = 3.27 + 0.001 * seed;
      r.steps = r.total_steps = 10;
      store.add_run(r);
    }
  }
  const Result r = harness({"plan", "--sweep", "untargeted"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("the sweep has no stored target; pass --target LOSS"), std::string::npos) << r.output;
  const Result given = harness({"plan", "--sweep", "untargeted", "--target", "3.3"});
  EXPECT_EQ(given.code, 0) << given.output;
  EXPECT_NE(given.output.find("target 3.3"), std::string::npos) << given.output;
}

// A --std of 1e-300 ended in a raw Boost exception.
TEST_F(RecordE2E, PlanWithAVanishingStdAnswers) {
  const Result r = harness({"plan", "--mean", "3.27", "--std", "1e-300", "--target", "3.28"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("boost"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gpt::harness

namespace gpt::harness {
namespace {

// A --resume refused after it read --runs 3 (here: the seeds would pass the largest one) stored planned = 3.
TEST_F(RecordE2E, ARefusedResumeLeavesThePlannedRunsAsTheyWere) {
  ASSERT_LE(record(1, {}, {"--first-seed", "9223372036854775806"}).code, 1);
  const Result r = harness({"record", "--resume", "sweep", "--runs", "3"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("the last seed would be beyond"), std::string::npos) << r.output;
  Store store = Store::open(db());
  EXPECT_EQ(store.find_sweep("sweep")->runs_planned, 1);
}

}  // namespace
}  // namespace gpt::harness
