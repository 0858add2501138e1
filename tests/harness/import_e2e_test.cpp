// End-to-end tests of `harness import`: arms named by their path below the import root, duplicate logs
// skipped by content hash, provenance from the trainer's OUT/ID.json, diverged and absurd logs, and an
// import that is one transaction (a killed import leaves nothing).
#include <csignal>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

using namespace std::chrono_literals;

const std::string kGood =
    "step:0/10 val_loss:10.8 train_time:0ms step_avg:0ms\nstep:10/10 val_loss:3.2500 train_time:900ms step_avg:90ms\n";
std::string good_log(double loss) {
  char line[128];
  std::snprintf(line, sizeof line, "step:10/10 val_loss:%.4f train_time:900ms step_avg:90ms\n", loss);
  return "step:0/10 val_loss:10.8 train_time:0ms step_avg:0ms\n" + std::string(line);
}

nlohmann::json report_json(const Result& r) { return nlohmann::json::parse(r.output.substr(r.output.find('{'))); }

// Issue: `A/baseline` and `B/baseline` became one arm.
TEST_F(RecordE2E, ImportNamesArmsByTheirPathBelowTheRoot) {
  dir.write("logs/2026-01-18_UnifiedOptimizers/baseline/a.txt", good_log(3.25));
  dir.write("logs/2026-01-18_UnifiedOptimizers/baseline/b.txt", good_log(3.26));
  dir.write("logs/2026-07-17_FP8DownProjection/baseline/c.txt", good_log(3.27));
  dir.write("logs/2026-07-17_FP8DownProjection/baseline/d.txt", good_log(3.28));
  dir.write("logs/top.txt", good_log(3.24));
  const Result r =
      harness({"import", (dir / "logs").string(), "--name", "sweep", "--format", "json", "--target", "3.5"});
  const auto doc = report_json(r);
  ASSERT_EQ(doc["arms"].size(), 3u) << r.output;
  EXPECT_EQ(doc["arms"][0]["arm"], "2026-01-18_UnifiedOptimizers/baseline");
  EXPECT_EQ(doc["arms"][0]["n_ok"], 2);
  EXPECT_EQ(doc["arms"][1]["arm"], "2026-07-17_FP8DownProjection/baseline");
  EXPECT_EQ(doc["arms"][2]["arm"], "logs");  // logs directly in the root take the root's name
}

// Issue: re-importing silently duplicated every run.
TEST_F(RecordE2E, ReimportedLogsAreSkippedWithAMessage) {
  dir.write("logs/a/x.txt", good_log(3.25));
  dir.write("logs/a/y.txt", good_log(3.26));
  ASSERT_EQ(harness({"import", (dir / "logs").string(), "--name", "first", "--target", "3.5"}).code, 0);
  const Result again = harness({"import", (dir / "logs").string(), "--target", "3.5"});
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("the same log was imported before (sweep \"first\""), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("reporting sweep \"first\""), std::string::npos) << again.output;
  dir.write("logs/a/z.txt", good_log(3.27));
  const Result partly = harness({"import", (dir / "logs").string(), "--name", "second", "--target", "3.5"});
  EXPECT_NE(partly.output.find("2 file(s) skipped as duplicates"), std::string::npos) << partly.output;
  Store store = Store::open(db());
  EXPECT_EQ(store.runs(store.find_sweep("first")->id).size(), 2u);
  EXPECT_EQ(store.runs(store.find_sweep("second")->id).size(), 1u);
  EXPECT_EQ(store.sweeps().size(), 2u);
}

// Issue: provenance was the harness's own checkout, not the trainer's (which ID.json records).
TEST_F(RecordE2E, ImportTakesProvenanceFromTheTrainersSummary) {
  dir.write("logs/r/run1.txt", kGood);
  dir.write("logs/r/run1.json", R"({"schema_version":1,"run_id":"run1","seed":7,
      "recipe":{"name":"head","hash":"9f3c0ffee"},"steps":10,"total_steps":10,"final_val_loss":3.2500,
      "world_size":8,"backend":"cuda","environment":{"gpu":"NVIDIA H100 80GB HBM3","git_commit":"abc1234"}})");
  const Result r = harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.5"});
  EXPECT_EQ(r.code, 1) << r.output;  // one ok run: the t-test needs two
  Store store = Store::open(db());
  const auto stored = store.runs(store.find_sweep("sweep")->id);
  ASSERT_EQ(stored.size(), 1u);
  ASSERT_TRUE(stored[0].environment_id);
  const auto env = store.environment(*stored[0].environment_id);
  EXPECT_EQ(env->git_commit, "abc1234");
  EXPECT_EQ(env->gpu, "NVIDIA H100 80GB HBM3");
  const auto params = store.params(OwnerKind::run, stored[0].id);
  EXPECT_EQ(params.at("recipe_hash"), "9f3c0ffee");
  EXPECT_EQ(params.at("world_size"), "8");
  EXPECT_EQ(params.at("content_hash").size(), 40u);
  const Result q = harness({"query", "env", std::to_string(*stored[0].environment_id)});
  EXPECT_NE(q.output.find("abc1234"), std::string::npos) << q.output;
}

// Issue: the trainer's diverged log (training lines carry no loss) imported as `incomplete`.
TEST_F(RecordE2E, DivergedTrainerLogImportsAsDiverged) {
  dir.write("logs/d/run.txt",
            "step:0/100 val_loss:10.8 train_time:0ms step_avg:0ms\nstep:37/100 train_time:400ms step_avg:10.8ms\n"
            "diverged: non-finite training loss at step 37\npeak memory allocated: 10 MiB reserved: 20 MiB\n");
  harness({"import", (dir / "logs").string(), "--name", "sweep"});
  const auto stored = runs();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].status, RunStatus::diverged) << stored[0].reason;
}

// Issue: a huge finite loss made import exit 2 ("runs_needed: sd must be finite") after storing the runs.
TEST_F(RecordE2E, HugeFiniteLossIsAFailedCheckNotAnError) {
  dir.write("logs/h/a.txt", good_log(3.25));
  dir.write("logs/h/b.txt", "step:10/10 val_loss:1e308 train_time:900ms step_avg:90ms\n");
  dir.write("logs/h/c.txt", "step:10/10 val_loss:1.5e308 train_time:900ms step_avg:90ms\n");
  const Result r = harness({"import", (dir / "logs").string(), "--name", "sweep"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("not finite"), std::string::npos) << r.output;
  EXPECT_EQ(runs().size(), 3u);
}

// Issue: kill -9 during an import left a partial sweep that nothing marked.
TEST_F(RecordE2E, KilledImportLeavesNoPartialSweep) {
  constexpr int kLogs = 4000;
  for (int i = 0; i < kLogs; ++i) {
    dir.write("logs/a/" + std::to_string(i) + ".txt", "run " + std::to_string(i) + "\n" + good_log(3.2 + i * 1e-6));
  }
  Process p = start({"import", (dir / "logs").string(), "--name", "sweep", "--format", "json"});
  // Kill it as soon as any run is visible, or after a while if none ever is (the import is one transaction).
  bool saw_runs = false;
  for (int i = 0; i < 300 && !saw_runs && p.running() && !p.poll(); ++i) {
    std::this_thread::sleep_for(5ms);
    if (!std::filesystem::exists(db())) continue;
    try {
      Store store = Store::open(db(), sql::OpenOptions{true, 100});
      auto s = store.find_sweep("sweep");
      saw_runs = s && !store.runs(s->id).empty();
    } catch (const gpt::Error&) {
    }
  }
  ::kill(p.pid(), SIGKILL);
  p.wait();
  Store store = Store::open(db());
  auto s = store.find_sweep("sweep");
  if (s) {
    EXPECT_EQ(store.runs(s->id).size(), static_cast<size_t>(kLogs)) << "a partial sweep was left behind";
  }
}

// A record folder that mixes the record's logs with comparison logs of another step count: one arm per
// experiment, said on the console; the import writes report.html beside report.md as record does.
TEST_F(RecordE2E, ImportSplitsAFolderThatMixesExperiments) {
  auto log_of = [](int total, double loss) {
    char line[128];
    std::snprintf(line, sizeof line, "step:%d/%d val_loss:%.4f train_time:900ms step_avg:90ms\n", total, total, loss);
    return "import torch\n=====\nstep:0/" + std::to_string(total) + " val_loss:10.8 train_time:0ms step_avg:0ms\n" +
           std::string(line);
  };
  for (int i = 0; i < 3; ++i) {
    dir.write("logs/Skip/record" + std::to_string(i) + ".txt", log_of(1705, 3.27 + 0.001 * i));
    dir.write("logs/Skip/compare" + std::to_string(i) + ".txt", log_of(1670, 3.29 + 0.001 * i));
  }
  const Result r =
      harness({"import", (dir / "logs").string(), "--name", "mixed", "--format", "json", "--target", "3.5"});
  const auto doc = report_json(r);
  ASSERT_EQ(doc["arms"].size(), 2u) << r.output;
  EXPECT_EQ(doc["arms"][0]["arm"], "Skip [1670 steps]");
  EXPECT_EQ(doc["arms"][1]["arm"], "Skip [1705 steps]");
  EXPECT_EQ(doc["arms"][0]["n_ok"], 3);
  EXPECT_NE(r.output.find("mixes 2 experiments (different step counts); split into arms"), std::string::npos)
      << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "reports" / "mixed" / "report.html"));
  EXPECT_TRUE(std::filesystem::exists(dir / "reports" / "mixed" / "report.md"));
  EXPECT_EQ(doc["html_report_path"], (dir / "reports" / "mixed" / "report.html").string());
}

}  // namespace
}  // namespace gpt::harness

namespace gpt::harness {
namespace {

// A file is a log by its extension (.txt, .log): "catalog" ends in "log" but has none, and was imported.
TEST_F(RecordE2E, ImportTakesLogsByTheirExtensionOnly) {
  const std::string log =
      "step:0/10 val_loss:10.8 train_time:0ms step_avg:0ms\n"
      "step:10/10 val_loss:3.25 train_time:900ms step_avg:90ms\n";
  dir.write("logs/run.txt", log);
  std::string other = log;  // another run, not a copy (copies are skipped)
  other.replace(other.find("3.25"), 4, "3.30");
  dir.write("logs/run2.log", other);
  dir.write("logs/catalog", log);
  dir.write("logs/README", log);
  const Result r = harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.5"});
  ASSERT_LE(r.code, 1) << r.output;
  EXPECT_EQ(runs().size(), 2u) << r.output;
  EXPECT_EQ(r.output.find("catalog"), std::string::npos) << r.output;
}

// A loss that is no number the harness reads was "without a final validation"; step:0/0 was "no step lines".
TEST_F(RecordE2E, ImportFailsALogWithAnUnreadableStepLineNamingIt) {
  dir.write("logs/comma.txt", "step:10/10 val_loss:3,2771 train_time:900ms step_avg:90ms\n");
  dir.write("logs/zero.txt", "step:0/0 val_loss:10.8 train_time:0ms step_avg:0ms\n");
  dir.write("logs/beyond.txt", "step:150/100 val_loss:3.2 train_time:900ms step_avg:6ms\n");
  ASSERT_LE(harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.5"}).code, 1);
  const auto stored = runs();
  ASSERT_EQ(stored.size(), 3u);
  for (const RunRecord& r : stored) {
    EXPECT_EQ(r.status, RunStatus::failed) << r.log_path << ": " << r.reason;
  }
  std::string reasons;
  for (const RunRecord& r : stored) reasons += r.reason + "\n";
  EXPECT_NE(reasons.find("val_loss '3,2771' is not a number"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("step:0/0"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("step 150 is beyond the total step count 100"), std::string::npos) << reasons;
}

}  // namespace
}  // namespace gpt::harness
