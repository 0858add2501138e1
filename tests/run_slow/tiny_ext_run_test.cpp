// The `tiny-ext` recipe end to end on the CPU (RECIPE §S at tiny scale): every §S switch on in one run loop —
// n-gram table events, value_embeds on the table cadence, sampled softmax, ANVIL, tail averaging shipped at the
// final validation, the canonical mask (tier 0 here: tier 1's build takes minutes under the sanitizers; its own
// tests cover it), the bucketed prefix table, the §S.10 warmup list and reset, thinned log lines.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "../run/run_test_util.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/training_run.h"
#include "trainer/run/training_state.h"

namespace gpt {
namespace {

using test::RunScratch;
using test::val_losses;

RunOptions tiny_ext_run(const RunScratch& scratch, const std::string& run_id) {
  RunOptions o;
  o.recipe = "tiny-ext";
  o.overrides = {"extensions.canonical_mask=tier0"};
  o.data_dir = scratch.data();
  o.seed = 3;
  o.run_id = run_id;
  o.out_dir = scratch.out();
  o.echo = false;
  return o;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The §S.10 warmup (21 of the 32 steps, events on every Adam step) and its reset leave no trace: the run equals the
// same run without warmup bit for bit (table, tail accumulators, sampler offsets, ANVIL rails all restored or
// zeroed). A resume from a checkpoint taken in the middle of a table cycle (steps 8 and 9 pending, event at 11)
// continues bit for bit, the table and its pending cycle included.
TEST(TinyExtRun, WarmupLeavesNoTraceAndResumeMidCycleIsBitExact) {
  RunScratch scratch;
  RunOptions cold = tiny_ext_run(scratch, "cold");
  cold.overrides.push_back("schedule.warmup=false");
  cold.checkpoint_every = 10;
  cold.final_checkpoint = true;
  const RunResult a = TrainingRun(cold).run();
  ASSERT_EQ(a.status, RunStatus::finished) << a.error;
  ASSERT_EQ(a.steps, 32);
  ASSERT_EQ(a.val_history.size(), 2u);  // steps 0 and 32 (the synthetic corpus is not learnable in 32 steps:
                                        // docs/ext-profile.md's tiny-ext run on data/default shows it)

  RunOptions warm = tiny_ext_run(scratch, "warm");
  warm.final_checkpoint = true;
  const RunResult b = TrainingRun(warm).run();
  ASSERT_EQ(b.status, RunStatus::finished) << b.error;
  EXPECT_EQ(a.train_losses, b.train_losses);
  EXPECT_EQ(val_losses(a), val_losses(b));
  EXPECT_EQ(first_difference(read_checkpoint(scratch.out() / "cold.final.ckpt").tensors,
                             read_checkpoint(scratch.out() / "warm.final.ckpt").tensors),
            "");

  const auto checkpoint = scratch.out() / "cold.step000010.ckpt";
  const CheckpointData saved = read_checkpoint(checkpoint);
  int table_tensors = 0, tail_tensors = 0, rails = 0;
  for (const NamedTensor& t : saved.tensors) {
    table_tensors += t.name.starts_with("ngram/") ? 1 : 0;
    tail_tensors += t.name.starts_with("tail/") ? 1 : 0;
    rails += t.name.ends_with("/slow_rail") ? 1 : 0;
  }
  EXPECT_GT(table_tensors, 0);
  EXPECT_GT(tail_tensors, 0);
  EXPECT_EQ(rails, 3);  // ANVIL state of the three banks

  RunOptions resumed = tiny_ext_run(scratch, "resumed");
  resumed.overrides.push_back("schedule.warmup=false");
  resumed.resume = checkpoint;
  resumed.final_checkpoint = true;
  const RunResult c = TrainingRun(resumed).run();
  ASSERT_EQ(c.status, RunStatus::finished) << c.error;
  ASSERT_EQ(c.train_losses.size(), 22u);
  EXPECT_EQ(std::vector<double>(a.train_losses.begin() + 10, a.train_losses.end()), c.train_losses);
  EXPECT_EQ(val_losses(a), val_losses(c));
  EXPECT_EQ(first_difference(read_checkpoint(scratch.out() / "cold.final.ckpt").tensors,
                             read_checkpoint(scratch.out() / "resumed.final.ckpt").tensors),
            "");

  // §S.11: training lines every log_every = 5 steps and for the last two; §S.10's warmup list.
  const std::string log = read_text(scratch.out() / "warm.txt");
  EXPECT_NE(log.find("step:5/32 train_time"), std::string::npos) << log;
  EXPECT_EQ(log.find("step:6/32 train_time"), std::string::npos) << log;
  EXPECT_NE(log.find("step:31/32 train_time"), std::string::npos) << log;
  EXPECT_NE(log.find("step:32/32 train_time"), std::string::npos) << log;
  EXPECT_NE(log.find("Sampling steps [0, 1, 5, 6, 7, 8, 14"), std::string::npos) << log;
}

}  // namespace
}  // namespace gpt
