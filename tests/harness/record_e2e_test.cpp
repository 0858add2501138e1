// End-to-end tests of `harness record`, `import` and `query`, driving the real programs with the synthetic
// trainer (both built into build*/bin/ by the harness and synthetic_trainer targets).
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "harness/launcher/process.h"
#include "harness/store/store.h"
#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

TEST_F(RecordE2E, PassingSweepStoresEveryRunAndWritesTheReport) {
  const Result r = record(3, {"--mean", "3.20", "--sd", "0.01"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("result: PASS"), std::string::npos) << r.output;
  auto stored = runs();
  ASSERT_EQ(stored.size(), 3u);
  std::set<std::int64_t> seeds;
  for (const auto& run : stored) {
    EXPECT_EQ(run.status, RunStatus::ok) << run.reason;
    seeds.insert(*run.seed);
    ASSERT_TRUE(run.final_val_loss);
    EXPECT_NEAR(*run.final_val_loss, 3.20, 0.06);
    EXPECT_EQ(run.steps, 20);
    EXPECT_EQ(run.tokens, 20 * 1024);  // only the JSON summary carries tokens
    EXPECT_EQ(run.val_points.size(), 5u);
    EXPECT_EQ(run.exit_code, 0);
  }
  EXPECT_EQ(seeds, (std::set<std::int64_t>{0, 1, 2}));
  const auto reports = dir / "reports" / "sweep";
  EXPECT_TRUE(std::filesystem::exists(reports / "report.md"));
  EXPECT_NE(read_file(reports / "val_loss_curves.svg").find("<polyline"), std::string::npos);
  EXPECT_NE(read_file(reports / "train_time.svg").find("<circle"), std::string::npos);
}

TEST_F(RecordE2E, MeanAboveTargetFailsWithExitOne) {
  const Result r = record(3, {"--mean", "3.35", "--sd", "0.01"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL: p = "), std::string::npos) << r.output;
}

TEST_F(RecordE2E, JsonReportCarriesTheFigures) {
  Result r = record(4, {"--mean", "3.25", "--sd", "0.01"}, {"--format", "json", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  const auto& arm = doc["arms"][0];
  EXPECT_EQ(arm["n_ok"], 4);
  EXPECT_EQ(arm["val_loss"]["n"], 4);
  EXPECT_LT(arm["t_test"]["p_value"].get<double>(), 0.01);
  EXPECT_EQ(arm["t_test"]["df"].get<double>(), 3.0);
  EXPECT_LT(arm["upper_confidence_bound"].get<double>(), 3.28);
  EXPECT_EQ(doc["pass"], true);
  EXPECT_EQ(arm["runs"].size(), 4u);
}

TEST_F(RecordE2E, CrashIsRecordedAsFailedAndListed) {
  const Result r = record(3, {"--mean", "3.20"}, {}, {{"SYNTH_MODE", "crash"}, {"SYNTH_MODE_SEEDS", "1"}});
  auto stored = runs();
  ASSERT_EQ(stored.size(), 3u);
  EXPECT_EQ(stored[1].status, RunStatus::failed);
  EXPECT_NE(stored[1].reason.find("crashed: signal 6"), std::string::npos) << stored[1].reason;
  EXPECT_EQ(stored[0].status, RunStatus::ok);
  EXPECT_NE(r.output.find("runs not ok"), std::string::npos) << r.output;
  EXPECT_EQ(r.code, 0) << r.output;  // the two ok runs still pass; the crash is listed, not dropped
}

TEST_F(RecordE2E, HangIsKilledAtTheTimeout) {
  const Result r = record(1, {}, {"--timeout", "1"}, {{"SYNTH_MODE", "hang"}});
  auto stored = runs();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].status, RunStatus::timeout);
  EXPECT_NE(stored[0].reason.find("timeout; process group killed"), std::string::npos) << stored[0].reason;
  EXPECT_EQ(r.code, 1);
}

// Neither step lines nor a summary: nothing of the run's own to judge, so it failed.
TEST_F(RecordE2E, GarbageOutputIsFailed) {
  record(1, {}, {}, {{"SYNTH_MODE", "garbage"}});
  auto stored = runs();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].status, RunStatus::failed);
  EXPECT_NE(stored[0].reason.find("no step lines"), std::string::npos) << stored[0].reason;
}

TEST_F(RecordE2E, DivergenceExitThreeIsDiverged) {
  record(1, {}, {}, {{"SYNTH_MODE", "diverge"}});
  auto stored = runs();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].status, RunStatus::diverged);
  EXPECT_EQ(stored[0].exit_code, 3);
}

// Without --target the recipe's [record] target is used, read from train_gpt (--print-recipe) beside the harness.
TEST_F(RecordE2E, TargetComesFromTheRecipeUnlessGiven) {
  ASSERT_TRUE(std::filesystem::exists(kBin + "train_gpt")) << "build the train_gpt target first";
  std::vector<std::string> args = {"record", "--runs", "2", "--name", "sweep", "--recipe", "tiny", "--"};
  for (auto& a : synthetic({"--mean", "5.0"})) args.push_back(a);
  const Result r = harness(args);
  EXPECT_EQ(r.code, 0) << r.output;  // tiny's target is far above 5.0; track 1's 3.28 would fail
  EXPECT_NE(r.output.find("from recipe tiny [record]: "), std::string::npos) << r.output;
  Store store = Store::open(db());
  const auto sweep = store.find_sweep("sweep");
  ASSERT_TRUE(sweep && sweep->target);
  EXPECT_GT(*sweep->target, 5.0);
  EXPECT_NE(store.params(OwnerKind::sweep, sweep->id).at("target_source").find("baselines/tiny.toml"),
            std::string::npos);

  args = {"record", "--runs", "2", "--name", "other", "--recipe", "head", "--"};
  for (auto& a : synthetic({"--mean", "5.0"})) args.push_back(a);
  const Result head = harness(args);
  EXPECT_EQ(head.code, 1) << head.output;  // head's target is 3.28
  EXPECT_NE(head.output.find("target 3.28 from recipe head [record]: track 1 rule"), std::string::npos) << head.output;

  const Result no_trainer = harness({"record", "--runs", "1", "--trainer", "/nonexistent/train_gpt", "--", "true"});
  EXPECT_EQ(no_trainer.code, 2) << no_trainer.output;
  EXPECT_NE(no_trainer.output.find("no --target given"), std::string::npos) << no_trainer.output;
  EXPECT_NE(no_trainer.output.find("pass --target"), std::string::npos) << no_trainer.output;

  // A trainer that cannot print its recipe: its own complaint is quoted.
  const Result cannot = harness({"record", "--runs", "1", "--trainer", kBin + "synthetic_trainer", "--", "true"});
  EXPECT_EQ(cannot.code, 2) << cannot.output;
  EXPECT_NE(cannot.output.find("exited with status 2 (The following argument was not expected: --print-recipe"),
            std::string::npos)
      << cannot.output;
}

// With --target given the trainer is still asked about the recipe and the overrides before the first run: an unknown
// recipe or key is a usage error (exit 2) naming what was given and the trainer's complaint, with no sweep stored.
TEST_F(RecordE2E, ARefusedRecipeOrOverrideFailsBeforeAnyRun) {
  ASSERT_TRUE(std::filesystem::exists(kBin + "train_gpt")) << "build the train_gpt target first";
  const std::string data = dir.path().string();
  const Result recipe = harness({"record", "--runs", "2", "--name", "s", "--recipe", "no-such-recipe", "--target",
                                 "3.0", "--trainer", kBin + "train_gpt", "--data", data});
  EXPECT_EQ(recipe.code, 2) << recipe.output;
  EXPECT_NE(recipe.output.find("refuses `--recipe no-such-recipe`"), std::string::npos) << recipe.output;
  EXPECT_NE(recipe.output.find("nothing was run"), std::string::npos) << recipe.output;
  const Result set = harness({"record", "--runs", "2", "--name", "s", "--recipe", "tiny", "--target", "3.0", "--set",
                              "optim.no_such_key=1", "--trainer", kBin + "train_gpt", "--data", data});
  EXPECT_EQ(set.code, 2) << set.output;
  EXPECT_NE(set.output.find("`--recipe tiny --set optim.no_such_key=1`"), std::string::npos) << set.output;
  EXPECT_NE(set.output.find("no_such_key"), std::string::npos) << set.output;
  if (std::filesystem::exists(db())) {
    Store store = Store::open(db());
    EXPECT_FALSE(store.find_sweep("s").has_value()) << "a refused record stored a sweep";
  }
}

TEST_F(RecordE2E, NonZeroExitIsFailedWithLastOutputLine) {
  record(1, {}, {}, {{"SYNTH_MODE", "fail"}});
  auto stored = runs();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].status, RunStatus::failed);
  EXPECT_NE(stored[0].reason.find("synthetic failure at step 10"), std::string::npos) << stored[0].reason;
}

// A stored setting that does not parse (a database edited by hand, or damaged) stops --resume with one clear error
// naming the sweep, its id and the key, instead of a bare "stoll" or a silently misread number.
TEST_F(RecordE2E, ResumeRefusesAMalformedStoredParameter) {
  ASSERT_EQ(record(1, {"--mean", "3.2"}, {"--quiet"}).code, 1);  // one run: the t-test cannot pass
  std::int64_t id = 0;
  {
    Store store = Store::open(db());
    id = store.find_sweep("sweep")->id;
    store.set_param(OwnerKind::sweep, id, "first_seed", "zero");
  }
  Result r = harness({"record", "--resume", "sweep", "--runs", "2", "--quiet"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("sweep 'sweep' (id " + std::to_string(id) +
                          "): its stored parameter 'first_seed' is 'zero', expected an integer"),
            std::string::npos)
      << r.output;
  {
    Store store = Store::open(db());
    store.set_param(OwnerKind::sweep, id, "first_seed", "0");
    store.set_param(OwnerKind::sweep, id, "timeout_s", "30s");  // stod read "30s" as 30
  }
  r = harness({"record", "--resume", "sweep", "--runs", "2", "--quiet"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("its stored parameter 'timeout_s' is '30s', expected a number"), std::string::npos)
      << r.output;
  EXPECT_EQ(runs().size(), 1u);  // nothing ran
}

TEST_F(RecordE2E, InterruptThenResumeCompletesTheSweep) {
  std::vector<std::string> args = {"record", "--runs", "4", "--name", "sweep", "--quiet", "--"};
  for (auto& a : synthetic({"--step-sleep-ms", "25", "--mean", "3.2"})) args.push_back(a);
  Process p = start(args);
  // Wait until at least one run is stored, then interrupt the harness mid-sweep.
  for (int i = 0; i < 400; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (std::filesystem::exists(db())) {
      Store store = Store::open(db());
      if (auto s = store.find_sweep("sweep"); s && !store.runs(s->id).empty()) break;
    }
  }
  // A run takes ~0.5 s: 150 ms after one is stored, the next is in flight.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ::kill(p.pid(), SIGINT);
  const ExitInfo exit = p.wait();
  ASSERT_TRUE(exit.exited);
  EXPECT_EQ(exit.exit_code, 130) << read_file(dir / "out.txt");
  auto before = runs();
  ASSERT_GE(before.size(), 1u);
  ASSERT_LT(before.size(), 4u + 1);
  std::map<std::int64_t, std::int64_t> ok_ids;
  int killed = 0;
  for (const auto& r : before) {
    if (r.status == RunStatus::ok) ok_ids[*r.seed] = r.id;
    if (r.status == RunStatus::killed) ++killed;
  }
  EXPECT_EQ(killed, 1) << read_file(dir / "out.txt");  // the run in flight
  ASSERT_LT(ok_ids.size(), 4u) << "the sweep finished before the interrupt; the test cannot check --resume";

  const Result resumed = harness({"record", "--resume", "sweep", "--quiet"});
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  auto after = runs();
  ASSERT_EQ(after.size(), 4u);
  for (const auto& r : after) {
    EXPECT_EQ(r.status, RunStatus::ok) << r.reason;
    if (ok_ids.count(*r.seed)) {
      EXPECT_EQ(r.id, ok_ids[*r.seed]) << "a finished run was re-run";
    }
  }
}

TEST_F(RecordE2E, LockedDatabaseIsAClearError) {
  { Store::open(db()); }
  Store holder = Store::open(db());
  holder.db().exec("BEGIN IMMEDIATE");
  const Result r = record(1, {}, {"--db-timeout", "100"});
  holder.db().exec("ROLLBACK");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("is locked by another process"), std::string::npos) << r.output;
}

TEST_F(RecordE2E, CorruptDatabaseIsAClearError) {
  std::ofstream(db()) << std::string(2048, 'z');
  const Result r = record(1, {});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("is not a valid SQLite database"), std::string::npos) << r.output;
}

TEST_F(RecordE2E, ParallelRunsGetDevicePartitions) {
  std::vector<std::string> args = {"record",
                                   "--runs",
                                   "2",
                                   "--name",
                                   "sweep",
                                   "--parallel",
                                   "2",
                                   "--gpus",
                                   "2",
                                   "--quiet",
                                   "--",
                                   "sh",
                                   "-c",
                                   "echo $CUDA_VISIBLE_DEVICES > {out}/devices; exec " + kBin +
                                       "synthetic_trainer --seed {seed} --run-id {run_id} --out {out} --mean 3.2"};
  const Result r = harness(args, {{"CUDA_VISIBLE_DEVICES", "4,5,6,7"}});
  ASSERT_EQ(r.code, 0) << r.output;
  std::set<std::string> seen;
  for (const auto& run : runs()) {
    std::string devices = read_file(std::filesystem::path(run.log_path).parent_path() / "devices");
    seen.insert(devices.substr(0, devices.find('\n')));
  }
  EXPECT_EQ(seen, (std::set<std::string>{"4,5", "6,7"}));
}

TEST_F(RecordE2E, MissingTrainerIsAUsageError) {
  const Result r = harness({"record", "--runs", "1", "--trainer", "/nonexistent/train_gpt"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("no trainer at '/nonexistent/train_gpt'"), std::string::npos) << r.output;
}

TEST_F(RecordE2E, BackendAndSetsReachTheTrainerAndTheStoredCommand) {
  const std::string trainer = kBin + "synthetic_trainer";
  const Result r = harness({"record", "--runs", "1", "--name", "sweep", "--trainer", trainer, "--backend", "cuda",
                            "--set", "data.cycle_train_shards=true", "--set", "validation.tokens=262144", "--quiet",
                            "--target", "3.28", "--data", dir.path().string()});
  ASSERT_LE(r.code, 1) << r.output;
  Store store = Store::open(db());
  const auto sweep = store.find_sweep("sweep");
  ASSERT_TRUE(sweep);
  const auto command = nlohmann::json::parse(sweep->command).get<std::vector<std::string>>();
  const std::vector<std::string> tail(command.end() - 6, command.end());
  EXPECT_EQ(tail, (std::vector<std::string>{"--backend", "cuda", "--set", "data.cycle_train_shards=true", "--set",
                                            "validation.tokens=262144"}));
  const auto stored = runs();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_NE(read_file(stored[0].log_path).find("backend=cuda"), std::string::npos);

  // A command after -- or a resumed sweep has its own command line: the flags would be ignored, so they are refused.
  const Result with_command = harness({"record", "--runs", "1", "--backend", "cuda", "--", trainer});
  EXPECT_EQ(with_command.code, 2) << with_command.output;
  EXPECT_NE(with_command.output.find("--backend/--set"), std::string::npos) << with_command.output;
  const Result resumed = harness({"record", "--resume", "sweep", "--set", "fp8=false"});
  EXPECT_EQ(resumed.code, 2) << resumed.output;
  const Result unknown_backend = harness({"record", "--runs", "1", "--backend", "tpu"});
  EXPECT_EQ(unknown_backend.code, 2) << unknown_backend.output;
}

TEST_F(RecordE2E, ImportMakesOneArmPerFolder) {
  const std::string good =
      "step:0/10 val_loss:10.8 train_time:0ms step_avg:0ms\nstep:10/10 val_loss:3.2500 train_time:900ms "
      "step_avg:90ms\n";
  const std::string other = "step:10/10 val_loss:3.2600 train_time:950ms step_avg:95ms\n";
  dir.write("logs/base/a.txt", good);
  dir.write("logs/base/b.txt", other);
  dir.write("logs/base/notes.md", "ignored");
  dir.write("logs/branch/c.txt", good + good);  // two runs in one file
  dir.write("logs/branch/d.txt", "step:5/10 train_time:400ms step_avg:80ms\n");
  const Result r =
      harness({"import", (dir / "logs").string(), "--name", "sweep", "--format", "json", "--target", "3.5"});
  ASSERT_EQ(r.code, 0) << r.output;  // the incomplete run is listed, not counted
  auto doc = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  ASSERT_EQ(doc["arms"].size(), 2u);
  EXPECT_EQ(doc["arms"][0]["arm"], "base");
  EXPECT_EQ(doc["arms"][0]["n_ok"], 2);
  EXPECT_EQ(doc["arms"][1]["n_ok"], 2);
  EXPECT_EQ(doc["arms"][1]["n_not_ok"], 1);
  EXPECT_NEAR(doc["arms"][0]["val_loss"]["mean"].get<double>(), 3.255, 1e-12);
}

TEST_F(RecordE2E, QueryFormatsAndReadOnlySql) {
  ASSERT_EQ(record(2, {"--mean", "3.2"}, {"--quiet"}).code, 0);
  Result csv = harness({"query", "runs", "--sweep", "sweep", "--format", "csv"});
  ASSERT_EQ(csv.code, 0) << csv.output;
  EXPECT_EQ(csv.output.rfind("id,sweep,arm,seed,run_id,status", 0), 0u) << csv.output;
  Result json = harness({"query", "sql", "SELECT COUNT(*) AS n FROM runs", "--format", "json"});
  ASSERT_EQ(json.code, 0) << json.output;
  EXPECT_EQ(nlohmann::json::parse(json.output)[0]["n"], 2);
  Result write = harness({"query", "sql", "DELETE FROM runs"});
  EXPECT_EQ(write.code, 2);
  EXPECT_NE(write.output.find("read-only"), std::string::npos) << write.output;
  Result sweeps = harness({"query", "sweeps"});
  EXPECT_NE(sweeps.output.find("sweep"), std::string::npos);
  Result bad = harness({"query", "runs", "--sweep", "nope"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("no sweep 'nope'"), std::string::npos);
}

}  // namespace
}  // namespace gpt::harness
