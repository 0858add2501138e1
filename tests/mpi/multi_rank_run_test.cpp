// Multi-rank `train_gpt` runs on CPU ranks (RECIPE §8): a `tiny` variant with 4 slices per loader call (A = 4 at
// W = 1) gives the same run at W = 2 (mpirun) and W = 4 (train_gpt --ranks 4); a rank's error, NaN or death ends
// every rank with the run's status; launch errors are one line before training; the harness records a W = 2 run.
//
// Equality is up to a tolerance, not bitwise: at W = 1 the four microbatches' gradients accumulate into one fp32
// buffer in slice order, at W = 2 each rank sums its two and the ranks' sums are added in rank order, so the fp32
// sums are associated differently (the per-rank and cross-rank orders are fixed, so each W is bitwise
// reproducible on its own).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../run/run_test_util.h"
#include "mpi_test_util.h"
#include "harness/store/store.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/training_run.h"
#include "trainer/run/training_state.h"

namespace gpt {
namespace {

using test::RunScratch;
using test::Shell;

const std::string kBin = std::string(SPEEDRUN_BINARY_DIR) + "/bin/";

// The tiny recipe on a short schedule (8 steps, validations at 0, 4 and 8), 4 slices per call, validation windows
// of 2,048 tokens (4 windows: one per rank at W = 4), on the stand-in model (bin/standin_train_gpt, train_gpt's
// program with tests/common/standin_model.h): every parameter kind of the optimizer
// (banks, sharded and replicated Adam, the tied pair) in seconds under the sanitizers (the GPT model takes minutes
// per run there; results/PERFORMANCE.md records its multi-rank runs).
std::string tiny_args(const RunScratch& scratch, const std::string& run_id) {
  std::string args = "--recipe tiny --data " + scratch.data().string() + " --seed 5 --run-id " + run_id + " --out " +
                     scratch.out().string() + " --backend cpu --threads 1 --set slices_per_call=4" +
                     " --set validation.batch_tokens=2048 --set validation.cu_rows=192";
  for (const std::string& o : test::short_schedule()) args += " --set " + o;
  return args;
}

nlohmann::json summary(const RunScratch& scratch, const std::string& run_id) {
  std::ifstream in(scratch.out() / (run_id + ".json"));
  return nlohmann::json::parse(in);
}

double max_relative_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(1e-3, std::abs(x[i])));
  }
  return worst;
}

class MultiRankRun : public ::testing::Test {
 protected:
  void SetUp() override { SKIP_WITHOUT_MPIRUN(); }
  Shell train(const std::string& prefix, const std::string& run_id, const std::string& extra = "") {
    return test::run_shell(prefix + kBin + "standin_train_gpt " + tiny_args(scratch_, run_id) + " " + extra,
                           scratch_.root());
  }
  RunScratch scratch_;
};

TEST_F(MultiRankRun, TinyAtFourSlicesEqualsOneRankOverTwoAndFourRanks) {
  const std::string final_ckpt = "--set debug.final_checkpoint=true";
  const Shell one = train("", "w1", final_ckpt);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const Shell two = train(test::mpirun_prefix(2), "w2", final_ckpt);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const Shell four = train("", "w4", "--ranks 4 " + final_ckpt);
  ASSERT_EQ(four.exit_code, 0) << four.output;

  const nlohmann::json base = summary(scratch_, "w1");
  const CheckpointData base_state = read_checkpoint(scratch_.out() / "w1.final.ckpt");
  for (const auto& [id, world] : {std::pair<std::string, int>{"w2", 2}, {"w4", 4}}) {
    SCOPED_TRACE(id);
    const nlohmann::json s = summary(scratch_, id);
    EXPECT_EQ(s["status"], "finished");
    EXPECT_EQ(s["world_size"], world);
    EXPECT_EQ(s["steps"], base["steps"]);
    EXPECT_EQ(s["tokens"], base["tokens"]);
    ASSERT_EQ(s["environment"]["ranks"].size(), static_cast<size_t>(world));
    EXPECT_EQ(s["environment"]["ranks"][world - 1]["device"], "cpu");
    ASSERT_EQ(s["val_history"].size(), base["val_history"].size());
    for (size_t i = 0; i < base["val_history"].size(); ++i) {
      EXPECT_EQ(s["val_history"][i]["step"], base["val_history"][i]["step"]);
      const double loss = s["val_history"][i]["val_loss"].get<double>();
      const double base_loss = base["val_history"][i]["val_loss"].get<double>();
      EXPECT_NEAR(loss, base_loss, 1e-4);
      std::cout << id << " val_loss at step " << s["val_history"][i]["step"] << ": " << loss << " (W = 1: " << base_loss
                << ")\n";
    }
    // Step 0 validates the initial weights, split over the ranks: only the mean's summation order differs.
    EXPECT_NEAR(s["val_history"][0]["val_loss"].get<double>(), base["val_history"][0]["val_loss"].get<double>(), 1e-12);
    const CheckpointData state = read_checkpoint(scratch_.out() / (id + ".final.ckpt"));
    int compared = 0;
    for (const NamedTensor& p : base_state.tensors) {
      if (p.name.rfind("param/", 0) != 0) continue;
      for (const NamedTensor& q : state.tensors) {
        if (q.name != p.name) continue;
        const double difference = max_relative_difference(p.tensor, q.tensor);
        EXPECT_LT(difference, 1e-3) << p.name;
        std::cout << id << " " << p.name << ": largest relative difference to W = 1: " << difference << "\n";
        ++compared;
      }
    }
    EXPECT_EQ(compared, 4);  // embed, lm_head, mlp_bank, scalars
  }
  std::ifstream log(scratch_.out() / "w4.txt");
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(text.find("world_size: 4 (launcher: mpi) accumulation: 1 microbatches"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 3: host="), std::string::npos) << text;
}

// --checkpoint-every at W = 2 writes one file per rank (each holds its optimizer shard); resuming from them
// continues the run bit for bit: same later validations, same final state on every rank.
TEST_F(MultiRankRun, ResumeAtTwoRanksContinuesBitIdentically) {
  const std::string saves = "--checkpoint-every 3 --set debug.final_checkpoint=true";
  const Shell straight = train(test::mpirun_prefix(2), "straight", saves);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const auto rank0 = scratch_.out() / "straight.step000003.ckpt";
  const auto rank1 = scratch_.out() / "straight.step000003.rank1.ckpt";
  ASSERT_TRUE(std::filesystem::exists(rank0));
  ASSERT_TRUE(std::filesystem::exists(rank1));
  EXPECT_EQ(rank_checkpoint_path(rank0, 1), rank1);
  EXPECT_EQ(read_checkpoint(rank1).meta.at("rank"), 1);
  // The ranks' optimizer shards differ, so the two files do too (a rank writing rank 0's state would pass below).
  EXPECT_NE(first_difference(read_checkpoint(rank0).tensors, read_checkpoint(rank1).tensors), "");

  const Shell resumed =
      train(test::mpirun_prefix(2), "resumed", "--resume " + rank0.string() + " --set debug.final_checkpoint=true");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const nlohmann::json a = summary(scratch_, "straight"), b = summary(scratch_, "resumed");
  EXPECT_EQ(a["val_history"].size(), b["val_history"].size());
  for (size_t i = 0; i < a["val_history"].size(); ++i) {
    EXPECT_EQ(a["val_history"][i]["val_loss"], b["val_history"][i]["val_loss"]) << "validation " << i;
  }
  EXPECT_EQ(a["final_val_loss"], b["final_val_loss"]);
  for (int rank : {0, 1}) {
    const CheckpointData fa = read_checkpoint(rank_checkpoint_path(scratch_.out() / "straight.final.ckpt", rank));
    const CheckpointData fb = read_checkpoint(rank_checkpoint_path(scratch_.out() / "resumed.final.ckpt", rank));
    EXPECT_EQ(first_difference(fa.tensors, fb.tensors), "") << "rank " << rank;
  }

  // A missing part is named before training; a W = 2 checkpoint does not resume a W = 1 run.
  std::filesystem::remove(rank1);
  Shell broken = train(test::mpirun_prefix(2), "broken", "--resume " + rank0.string());
  EXPECT_NE(broken.exit_code, 0);
  EXPECT_NE(broken.output.find("straight.step000003.rank1.ckpt' is missing"), std::string::npos) << broken.output;
  broken = train("", "single", "--resume " + rank0.string());
  EXPECT_NE(broken.exit_code, 0);
  EXPECT_NE(broken.output.find("written with world size 2, this run has 1"), std::string::npos) << broken.output;
}

TEST_F(MultiRankRun, KilledRankEndsTheRunWithExitOne) {
  const Shell s = train("", "killed", "--ranks 2 --set debug.fault=kill:1:2");
  EXPECT_EQ(s.exit_code, 1) << s.output;
  EXPECT_LT(s.seconds, 120) << s.output;
  EXPECT_NE(s.output.find("rank 1"), std::string::npos) << s.output;
}

// mpirun's code (137) named neither the rank nor the signal ("rank 0 ended with code 137": the launcher's only
// child is mpirun); the ranks' own status files do.
TEST_F(MultiRankRun, KilledRankIsNamedWithItsSignal) {
  const Shell s = train("", "killed", "--ranks 2 --set debug.fault=kill:1:2");
  EXPECT_EQ(s.exit_code, 1) << s.output;
  EXPECT_NE(s.output.find("launcher: the run failed: "), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("rank 1 ended without a status: killed by SIGKILL"), std::string::npos) << s.output;
  EXPECT_EQ(s.output.find("launcher: rank 0 ended with code"), std::string::npos) << s.output;
}

// SIGTERM to the `--ranks N` launcher reaches the ranks (not mpirun, which killed them before rank 0 could write
// anything): rank 0 logs the interruption and writes the summary, the launcher waits and says so, exit 128 + 15.
TEST_F(MultiRankRun, SigtermToTheLauncherStopsTheRanksWithASummary) {
  const auto log = scratch_.out() / "stopped.txt";
  const auto script = scratch_.root() / "stop.sh";
  std::ofstream(script) << kBin << "standin_train_gpt " << tiny_args(scratch_, "stopped")
                        << " --ranks 2 --set schedule.num_scheduled=100000 &\n"
                        << "launcher=$!\n"
                        << "for i in $(seq 1200); do grep -q '^step:2/' " << log.string()
                        << " 2>/dev/null && break; sleep 0.1; done\n"
                        << "kill -TERM $launcher\nwait $launcher\necho \"launcher exit: $?\"\n";
  const Shell s = test::run_shell("bash " + script.string(), scratch_.root(), 300);
  EXPECT_NE(s.output.find("launcher exit: 143"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("launcher: received SIGTERM; forwarding it to 2 rank(s)"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("launcher: interrupted by SIGTERM: the ranks were stopped and have ended"), std::string::npos)
      << s.output;
  const nlohmann::json j = summary(scratch_, "stopped");
  EXPECT_EQ(j["status"], "failed") << j;
  EXPECT_NE(j["error"].get<std::string>().find("interrupted by SIGTERM"), std::string::npos) << j;
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("failed: "), std::string::npos) << text;
  EXPECT_NE(text.find("interrupted by SIGTERM"), std::string::npos) << text;
}

TEST_F(MultiRankRun, FailingRankIsNamedInTheSummary) {
  const Shell s = train(test::mpirun_prefix(2), "error", "--set debug.fault=error:1:2");
  EXPECT_EQ(s.exit_code, 1) << s.output;
  const nlohmann::json j = summary(scratch_, "error");
  EXPECT_EQ(j["status"], "failed");
  EXPECT_NE(j["error"].get<std::string>().find("rank 1: debug.fault: injected error"), std::string::npos) << j;
}

TEST_F(MultiRankRun, NanOnOneRankDivergesEveryRankWithExitThree) {
  const Shell s = train(test::mpirun_prefix(2), "nan", "--set debug.fault=nan:1:1");
  EXPECT_EQ(s.exit_code, 3) << s.output;
  const nlohmann::json j = summary(scratch_, "nan");
  EXPECT_EQ(j["status"], "diverged");
  // Rank 0 writes the summary: its own state is finite, and the exchange names rank 1 as the one holding the NaN.
  const std::string error = j["error"];
  EXPECT_TRUE(error.starts_with("non-finite training loss at step 1 (rank 1); rank 0: every one of the ")) << j;
  EXPECT_TRUE(error.ends_with("; ranks holding non-finite state: 1")) << j;
}

TEST_F(MultiRankRun, LaunchErrorsAreOneLineBeforeTraining) {
  Shell s = train("", "three", "--ranks 3");
  EXPECT_EQ(s.exit_code, 2) << s.output;
  EXPECT_EQ(s.output.rfind("standin_train_gpt: --ranks 3: the ranks of a run must divide 8 (1, 2, 4 or 8)", 0), 0u)
      << s.output;
  EXPECT_EQ(std::count(s.output.begin(), s.output.end(), '\n'), 1) << s.output;
  s = test::run_shell(kBin + "train_gpt --recipe tiny --data " + scratch_.data().string() +
                          " --seed 1 --run-id x --out " + scratch_.out().string() + " --backend cpu --ranks 2",
                      scratch_.root());
  EXPECT_EQ(s.exit_code, 2) << s.output;
  EXPECT_NE(s.output.find("recipe 'tiny' builds 1 slice(s) per loader call"), std::string::npos) << s.output;
  EXPECT_EQ(std::count(s.output.begin(), s.output.end(), '\n'), 1) << s.output;
  s = train("", "gpus", "--gpus 2");
  EXPECT_EQ(s.exit_code, 2) << s.output;
  EXPECT_NE(s.output.find("use --ranks 2 for CPU ranks"), std::string::npos) << s.output;
  s = train(test::mpirun_prefix(2), "mpi3", "--set slices_per_call=3");  // rejected by the recipe or the ranks
  EXPECT_EQ(s.exit_code, 2) << s.output;
}

TEST_F(MultiRankRun, HarnessRecordsATwoRankCpuRun) {
  const std::string db = (scratch_.root() / "results.db").string();
  const std::string command = kBin + "harness --db " + db +
                              " record --runs 1 --name w2 --recipe tiny --gpus 2 --data " + scratch_.data().string() +
                              " -- " + kBin + "standin_train_gpt " +
                              "--recipe tiny --data {data} --seed {seed} --run-id {run_id} --out {out} --backend cpu "
                              "--ranks {gpus} --threads 1 --set slices_per_call=4 --set validation.batch_tokens=2048 "
                              "--set validation.cu_rows=192";
  std::string with_schedule = command;
  for (const std::string& o : test::short_schedule()) with_schedule += " --set " + o;
  const Shell s = test::run_shell(with_schedule, scratch_.root(), 300);
  // The tiny model does not reach the record target: the verdict is "not a record" (exit 1), the run is stored.
  EXPECT_TRUE(s.exit_code == 0 || s.exit_code == 1) << s.output;
  harness::Store store = harness::Store::open(db);
  const auto sweep = store.find_sweep("w2");
  ASSERT_TRUE(sweep.has_value()) << s.output;
  const std::vector<harness::RunRecord> runs = store.runs(sweep->id, true);
  ASSERT_EQ(runs.size(), 1u) << s.output;
  EXPECT_EQ(runs[0].status, harness::RunStatus::ok) << s.output;
  EXPECT_EQ(runs[0].exit_code, 0);
  EXPECT_TRUE(runs[0].final_val_loss.has_value());
  std::ifstream in(runs[0].log_path);
  const std::string log((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(log.find("world_size: 2 (launcher: mpi)"), std::string::npos) << runs[0].log_path << "\n" << log;
}

}  // namespace
}  // namespace gpt
