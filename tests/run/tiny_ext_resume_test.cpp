// `tiny-ext` at a narrower width (d = 48, 6 heads of 8, an 8,192-row n-gram table), its first 15 steps: the run-loop
// mechanics of RECIPE §S in CI's budget. The resume from a checkpoint taken in the middle of a table cycle (steps 8
// and 9 pending, next event at 11) must continue bit for bit across that event, to the state after step 15 (steps
// 12-14 pending): table, pending cycle, tail accumulators, ANVIL rails, sampler offsets. The whole full-width runs,
// with the §S.10 warmup, are tests/run_slow/ (label `slow`).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "run_test_util.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/training_run.h"
#include "trainer/run/training_state.h"

namespace gpt {
namespace {

using test::RunScratch;
using test::val_losses;

RunOptions narrow_tiny_ext(const RunScratch& scratch, const std::string& run_id) {
  RunOptions o;
  o.recipe = "tiny-ext";
  o.overrides = {"extensions.canonical_mask=tier0",
                 "schedule.warmup=false",
                 "model.model_dim=48",
                 "model.head_dim=8",
                 "model.mlp_hidden=192",
                 "extensions.ngram_rows=8192"};
  o.data_dir = scratch.data();
  o.seed = 5;
  o.run_id = run_id;
  o.out_dir = scratch.out();
  o.echo = false;
  o.stop_after_step = 15;  // writes OUT/ID.step000015.ckpt and ends
  return o;
}

TEST(TinyExtResume, MidCycleCheckpointContinuesBitExactlyAcrossAnEvent) {
  RunScratch scratch;
  RunOptions cold = narrow_tiny_ext(scratch, "cold");
  cold.checkpoint_every = 10;
  const RunResult a = TrainingRun(cold).run();
  ASSERT_EQ(a.error, "stopped after step 15 (debug.stop_after_step)");
  ASSERT_EQ(a.steps, 15);

  const auto checkpoint = scratch.out() / "cold.step000010.ckpt";
  const CheckpointData saved = read_checkpoint(checkpoint);
  int table_tensors = 0, pending_cycle = 0, tail_tensors = 0, rails = 0;
  for (const NamedTensor& t : saved.tensors) {
    table_tensors += t.name.starts_with("ngram/") ? 1 : 0;
    pending_cycle += t.name == "ngram/cycle_grad" && t.tensor.numel() > 0 ? 1 : 0;
    tail_tensors += t.name.starts_with("tail/") ? 1 : 0;
    rails += t.name.ends_with("/slow_rail") ? 1 : 0;
  }
  EXPECT_GT(table_tensors, 0);
  EXPECT_EQ(pending_cycle, 1);  // steps 8 and 9 wait for the event at 11
  EXPECT_GT(tail_tensors, 0);
  EXPECT_EQ(rails, 3);  // ANVIL state of the three banks

  RunOptions resumed = narrow_tiny_ext(scratch, "resumed");
  resumed.resume = checkpoint;
  const RunResult c = TrainingRun(resumed).run();
  ASSERT_EQ(c.error, "stopped after step 15 (debug.stop_after_step)");
  ASSERT_EQ(c.train_losses.size(), 5u);
  EXPECT_EQ(std::vector<double>(a.train_losses.begin() + 10, a.train_losses.end()), c.train_losses);
  EXPECT_EQ(val_losses(a), val_losses(c));  // step 0's, carried by the checkpoint
  const CheckpointData cold_15 = read_checkpoint(scratch.out() / "cold.step000015.ckpt");
  const CheckpointData resumed_15 = read_checkpoint(scratch.out() / "resumed.step000015.ckpt");
  EXPECT_EQ(first_difference(cold_15.tensors, resumed_15.tensors), "");
  EXPECT_EQ(cold_15.meta.at("loader"), resumed_15.meta.at("loader"));
}

}  // namespace
}  // namespace gpt
