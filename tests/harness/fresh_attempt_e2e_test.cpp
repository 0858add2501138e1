// A stored result comes only from the run that made it: each attempt starts in an empty run folder, and a run
// that wrote neither step lines nor a summary is `failed`, never judged by files another run left behind (an
// earlier attempt, or a sweep of the same name in another database beside this one).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/store/store.h"
#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

class FreshAttemptE2E : public RecordE2E {
 protected:
  // `record` of `runs` seeds into database `db_name` (in the test folder) with CMD after `--`.
  Result record_into(const std::string& db_name, int runs, const std::vector<std::string>& command) {
    std::vector<std::string> args = {
        "--db", (dir / db_name).string(), "record", "--runs", std::to_string(runs), "--name", "s", "--target", "3.28",
        "--"};
    args.insert(args.end(), command.begin(), command.end());
    return harness_without_db(args);
  }

  std::vector<RunRecord> runs_of(const std::string& db_name) {
    Store store = Store::open(dir / db_name);
    return store.runs(store.find_sweep("s")->id, true);
  }

  // The GPU the environment stored with `run` names ("" when none).
  std::string stored_gpu(const std::string& db_name, const RunRecord& run) {
    if (!run.environment_id) return "";
    Store store = Store::open(dir / db_name);
    const auto env = store.environment(*run.environment_id);
    return env ? env->gpu : "";
  }

  // Every kind of file a run leaves in its folder, as a complete, finished run of `run_id` would have written
  // them, with a loss of 2.5 and a GPU named STALE-GPU that no run of this test has.
  void plant_stale_run(const std::string& run_id) {
    const std::string folder = "runs/s/" + run_id + "/";
    const std::string steps =
        "step:0/10 val_loss:9.0000 train_time:0ms step_avg:0.00ms\n"
        "step:10/10 val_loss:2.5000 train_time:1000ms step_avg:100.00ms\n"
        "peak memory allocated: 5 MiB reserved: 6 MiB\n";
    dir.write(folder + run_id + ".json",
              R"({"schema_version":1,"run_id":")" + run_id +
                  R"(","status":"ok","final_val_loss":2.5,"train_time_ms":1000,"steps":10,"total_steps":10,
                  "tokens":999,"val_history":[{"step":10,"val_loss":2.5,"train_time_ms":1000}],
                  "recipe":{"name":"tiny","hash":"5ta1e5ta1e"},"backend":"cuda",
                  "environment":{"gpu":"STALE-GPU","driver":"1.0","cuda":"1.0","git_commit":"5ta1e00"}})");
    dir.write(folder + run_id + ".txt", "run_id: " + run_id + " seed: 0\nenvironment: gpu=STALE-GPU\n" + steps);
    dir.write(folder + "console.log", steps);
    dir.write(folder + "slurm-7.log", steps);
    dir.write(folder + run_id + ".final.ckpt", "stale checkpoint");
  }
};

// A trainer that writes nothing, run into a second database beside the first: before, b.db stored the first
// database's losses and environment as `ok` runs and the sweep passed.
TEST_F(FreshAttemptE2E, ASecondDatabaseNeverReadsTheFirstOnesRunFiles) {
  const Result first = record_into("a.db", 2, synthetic({"--mean", "3.0", "--sd", "0.01"}));
  ASSERT_EQ(first.code, 0) << first.output;
  for (const auto& run : runs_of("a.db")) ASSERT_EQ(run.status, RunStatus::ok) << run.reason;

  const Result second = record_into("b.db", 2, {"/bin/sh", "-c", "exit 0"});
  EXPECT_EQ(second.code, 1) << second.output;
  EXPECT_EQ(second.output.find("PASS"), std::string::npos) << second.output;
  const auto stored = runs_of("b.db");
  ASSERT_EQ(stored.size(), 2u);
  for (const auto& run : stored) {
    EXPECT_EQ(run.status, RunStatus::failed) << run.reason;
    EXPECT_NE(run.reason.find("wrote no result"), std::string::npos) << run.reason;
    EXPECT_FALSE(run.final_val_loss) << *run.final_val_loss;
    EXPECT_FALSE(run.train_time_ms);
    EXPECT_TRUE(run.val_points.empty());
    EXPECT_EQ(stored_gpu("b.db", run), "");
  }
}

// Stale files of every kind (summary JSON with its environment, the trainer's log, console and Slurm step lines,
// a checkpoint) in each run folder: a silent run fails, a crashing one fails by its crash, and a run that prints
// its own step lines is judged by them alone; nothing of the stale files reaches the database or the report.
TEST_F(FreshAttemptE2E, StaleFilesOfEveryKindInTheRunFolderAreNeverRead) {
  for (const char* id : {"s-seed0", "s-seed1", "s-seed2"}) plant_stale_run(id);
  const auto trainer = script("trainer.sh",
                              "case \"$SPEEDRUN_SEED\" in\n"
                              "  0) exit 0 ;;\n"
                              "  1) kill -SEGV $$ ;;\n"
                              "  *) echo 'step:10/10 val_loss:3.1000 train_time:2000ms step_avg:200.00ms' ;;\n"
                              "esac\n");
  const Result r = record_into("results.db", 3, {trainer.string()});
  EXPECT_EQ(r.code, 1) << r.output;  // one ok run is too few for the record check
  const auto stored = runs_of("results.db");
  ASSERT_EQ(stored.size(), 3u);

  EXPECT_EQ(stored[0].status, RunStatus::failed);
  EXPECT_NE(stored[0].reason.find("wrote no result"), std::string::npos) << stored[0].reason;
  EXPECT_EQ(stored[1].status, RunStatus::failed);
  EXPECT_NE(stored[1].reason.find("crashed: signal 11"), std::string::npos) << stored[1].reason;
  for (int i : {0, 1}) {
    EXPECT_FALSE(stored[i].final_val_loss) << "seed " << i << ": " << *stored[i].final_val_loss;
    EXPECT_FALSE(stored[i].train_time_ms) << "seed " << i;
    EXPECT_FALSE(stored[i].steps) << "seed " << i;
    EXPECT_FALSE(stored[i].tokens) << "seed " << i;
    EXPECT_TRUE(stored[i].val_points.empty()) << "seed " << i;
  }
  EXPECT_EQ(stored[2].status, RunStatus::ok) << stored[2].reason;
  ASSERT_TRUE(stored[2].final_val_loss);
  EXPECT_DOUBLE_EQ(*stored[2].final_val_loss, 3.1);
  EXPECT_EQ(stored[2].train_time_ms, 2000.0);
  EXPECT_FALSE(stored[2].tokens);  // only the stale summary had tokens
  for (const auto& run : stored) EXPECT_NE(stored_gpu("results.db", run), "STALE-GPU") << run.run_id;

  const std::string report = read_file(dir / "reports" / "s" / "report.md");
  EXPECT_EQ(report.find("STALE-GPU"), std::string::npos) << report;
  EXPECT_EQ(report.find("2.5000"), std::string::npos) << report;
  EXPECT_EQ(report.find("5ta1e"), std::string::npos) << report;
  for (const char* id : {"s-seed0", "s-seed1", "s-seed2"}) {
    const auto folder = dir / "runs" / "s" / id;
    EXPECT_FALSE(std::filesystem::exists(folder / (std::string(id) + ".json"))) << id;
    EXPECT_FALSE(std::filesystem::exists(folder / "slurm-7.log")) << id;
    EXPECT_FALSE(std::filesystem::exists(folder / (std::string(id) + ".final.ckpt"))) << id;
    EXPECT_TRUE(std::filesystem::exists(folder / "console.log")) << id;  // this attempt's own
  }
}

}  // namespace
}  // namespace gpt::harness
