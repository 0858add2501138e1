// Schedule of RECIPE §1.6, §4.4, §4.6, §5, §6, §9.1 (reference numbers) and §R.1 (tiny).
#include <gtest/gtest.h>

#include <cmath>

#include "base/check.h"
#include "trainer/schedule/schedule.h"

namespace gpt {
namespace {

class HeadSchedule : public ::testing::Test {
 protected:
  Schedule sched{load_recipe("head")};
};

TEST_F(HeadSchedule, StageBoundaries) {
  EXPECT_EQ(sched.total_steps(), 1285);
  ASSERT_EQ(sched.num_stages(), 4);
  const int64_t begins[] = {0, 423, 847, 1270}, ends[] = {423, 847, 1270, 1285};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(sched.stage_begin(i), begins[i]);
    EXPECT_EQ(sched.stage_end(i), ends[i]);
  }
  EXPECT_EQ(sched.stage_of(0), 0);
  EXPECT_EQ(sched.stage_of(422), 0);
  EXPECT_EQ(sched.stage_of(423), 1);
  EXPECT_EQ(sched.stage_of(846), 1);
  EXPECT_EQ(sched.stage_of(847), 2);
  EXPECT_EQ(sched.stage_of(1269), 2);
  EXPECT_EQ(sched.stage_of(1270), 3);
  EXPECT_EQ(sched.stage_of(1285), 3);
  EXPECT_THROW(sched.stage_of(1286), Error);
  EXPECT_THROW(sched.stage_of(-1), Error);
}

TEST_F(HeadSchedule, TokensPerStageMatchTable16) {
  EXPECT_EQ(sched.stage_tokens(0), 55'443'456);
  EXPECT_EQ(sched.stage_tokens(1), 111'149'056);
  EXPECT_EQ(sched.stage_tokens(2), 166'330'368);
  EXPECT_EQ(sched.stage_tokens(3), 5'898'240);
  EXPECT_EQ(sched.total_tokens(), 338'821'120);
}

TEST_F(HeadSchedule, SliceTokensRowsAndLmax) {
  const int64_t steps[] = {0, 423, 847, 1270};
  const int64_t T[] = {16384, 32768, 49152, 49152}, R[] = {64, 96, 128, 128}, L[] = {896, 2048, 2048, 2048};
  const int64_t B[] = {131072, 262144, 393216, 393216};
  for (int i = 0; i < 4; ++i) {
    const StepSchedule s = sched.at(steps[i]);
    EXPECT_EQ(s.batch_tokens, B[i]);
    EXPECT_EQ(s.slice_tokens, T[i]);
    EXPECT_EQ(s.cu_rows, R[i]);
    EXPECT_EQ(s.lmax, L[i]);
  }
  EXPECT_EQ(Schedule::cu_rows_for(40960), 128);  // §S.1's table entry for the taper (the formula would give 256)
  EXPECT_EQ(Schedule::cu_rows_for(45056), 256);  // 128·⌈150/128⌉
  EXPECT_EQ(Schedule::cu_rows_for(512), 128);
}

// [project definition] schedule.cu_rows_multiplier scales every training slice's R (corpora of short documents);
// validation keeps its own validation.cu_rows.
TEST(ScheduleCuRows, MultiplierScalesTrainingRows) {
  const Recipe recipe = load_recipe("mini", {"schedule.cu_rows_multiplier=4"});
  const Schedule sched(recipe);
  EXPECT_EQ(sched.at(0).cu_rows, 4 * 64);
  EXPECT_EQ(sched.at(900).cu_rows, 4 * 128);
  EXPECT_THROW(load_recipe("mini", {"schedule.cu_rows_multiplier=0"}), Error);
}

TEST_F(HeadSchedule, Windows) {
  const int64_t steps[] = {0, 423, 847, 1270};
  const int64_t ws[] = {128, 384, 640, 768}, wl[] = {384, 896, 1408, 1664};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(sched.at(steps[i]).ws_short_tokens, ws[i]);
    EXPECT_EQ(sched.at(steps[i]).ws_long_tokens, wl[i]);
  }
  EXPECT_EQ(sched.at(422).ws_long_blocks, 3);
  EXPECT_EQ(sched.at(1285).ws_short_tokens, 768);  // final validation: (6, 20) blocks
  EXPECT_EQ(sched.at(1285).ws_long_tokens, 2560);
  const ValidationWindows final_windows = sched.validation_windows(1285);
  EXPECT_EQ(final_windows.ws_long_tokens, 2560);
  EXPECT_FALSE(final_windows.yarn);
  EXPECT_EQ(sched.validation_windows(1250).ws_long_tokens, 1408);
  EXPECT_TRUE(sched.validation_windows(1250).yarn);
}

TEST_F(HeadSchedule, YarnEventsAndAttentionScale) {
  const auto events = sched.yarn_events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].step, 423);
  EXPECT_EQ(events[0].old_long_tokens, 384);
  EXPECT_EQ(events[0].new_long_tokens, 896);
  EXPECT_EQ(events[1].step, 847);
  EXPECT_EQ(events[1].new_long_tokens, 1408);
  EXPECT_EQ(events[2].step, 1270);
  EXPECT_EQ(events[2].old_long_tokens, 1408);
  EXPECT_EQ(events[2].new_long_tokens, 1664);
  EXPECT_FALSE(sched.yarn_event(424).has_value());
  ASSERT_TRUE(sched.yarn_event(847).has_value());
  // τ after each event (§2.11): 0.116946, 0.127518, 0.131778.
  double tau = 0.1;
  const double expected[] = {0.116946, 0.127518, 0.131778};
  for (size_t i = 0; i < 3; ++i) {
    tau *= 1 + 0.2 * std::log(static_cast<double>(events[i].new_long_tokens) / events[i].old_long_tokens);
    EXPECT_NEAR(tau, expected[i], 5e-7);
  }
}

TEST_F(HeadSchedule, LearningRateMultiplier) {
  EXPECT_DOUBLE_EQ(sched.lr_mult(0), 1.0);
  EXPECT_DOUBLE_EQ(sched.lr_mult(422), 1.0);
  EXPECT_DOUBLE_EQ(sched.lr_mult(423), 1.52);
  EXPECT_DOUBLE_EQ(sched.lr_mult(507), 1.52);
  EXPECT_DOUBLE_EQ(sched.lr_mult(508), 1.52);                       // c0 = 508: t = 0
  EXPECT_NEAR(sched.lr_mult(846), 1.52 - 1.37 * 338 / 762, 1e-15);  // 0.912310
  EXPECT_NEAR(sched.lr_mult(846), 0.9123097, 1e-7);
  EXPECT_NEAR(sched.lr_mult(847), 1.0270866, 1e-7);  // jumps to 1.73 at the stage start
  EXPECT_NEAR(sched.lr_mult(1269), 0.1520735, 1e-7);
  EXPECT_DOUBLE_EQ(sched.lr_mult(1270), 0.15);
  EXPECT_DOUBLE_EQ(sched.lr_mult(1284), 0.15);
}

TEST_F(HeadSchedule, Momentum) {
  EXPECT_DOUBLE_EQ(sched.momentum(0), 0.85);
  EXPECT_NEAR(sched.momentum(299), 0.85 + 0.10 * 299 / 300, 1e-15);
  EXPECT_DOUBLE_EQ(sched.momentum(300), 0.95);
  EXPECT_DOUBLE_EQ(sched.momentum(1235), 0.95);  // N − 50: still the plateau
  EXPECT_NEAR(sched.momentum(1236), 0.948, 1e-15);
  EXPECT_NEAR(sched.momentum(1284), 0.852, 1e-15);
}

TEST_F(HeadSchedule, MtpAndPrefixWeights) {
  EXPECT_EQ(sched.mtp_weights(0), (std::vector<double>{1.0, 0.5, 0.25}));
  const auto w422 = sched.mtp_weights(422);
  ASSERT_EQ(w422.size(), 3u);
  EXPECT_NEAR(w422[2], 0.25 / 423, 1e-15);
  EXPECT_DOUBLE_EQ(w422[1], 0.5);
  EXPECT_EQ(sched.mtp_weights(423), (std::vector<double>{1.0, 0.5}));
  EXPECT_NEAR(sched.mtp_weights(846)[1], 0.5 / 424, 1e-15);
  EXPECT_EQ(sched.mtp_weights(847).size(), 1u);
  EXPECT_EQ(sched.mtp_weights(1284).size(), 1u);
  EXPECT_EQ(sched.mtp_weights(1285), (std::vector<double>{1.0}));
  EXPECT_DOUBLE_EQ(sched.prefix_weight(0), 0.25);
  EXPECT_DOUBLE_EQ(sched.prefix_weight(422), 0.25);
  EXPECT_DOUBLE_EQ(sched.prefix_weight(423), 0.25);
  EXPECT_NEAR(sched.prefix_weight(846), 0.25 / 424, 1e-15);
  EXPECT_DOUBLE_EQ(sched.prefix_weight(847), 0.0);
}

TEST_F(HeadSchedule, AdamParitySplitAndTie) {
  EXPECT_FALSE(sched.at(0).adam_step);
  EXPECT_TRUE(sched.at(1).adam_step);
  EXPECT_EQ(sched.split_step(), 847);
  EXPECT_TRUE(sched.at(846).tied);
  EXPECT_TRUE(sched.at(847).tied);
  EXPECT_TRUE(sched.at(847).split_step);
  EXPECT_TRUE(sched.at(847).adam_step);
  EXPECT_FALSE(sched.at(848).tied);
  EXPECT_FALSE(sched.at(848).split_step);
}

TEST_F(HeadSchedule, ValidationSteps) {
  EXPECT_EQ(sched.validation_steps(), (std::vector<int64_t>{0, 250, 500, 750, 1000, 1250, 1285}));
  EXPECT_TRUE(sched.at(250).validation);
  EXPECT_FALSE(sched.at(251).validation);
}

TEST_F(HeadSchedule, WarmupSteps) {
  EXPECT_EQ(sched.warmup_steps(),
            (std::vector<int64_t>{0, 1, 421, 422, 423, 424, 845, 846, 847, 848, 1268, 1269, 1270, 1271}));
}

TEST(TinySchedule, MatchesR1) {
  const Schedule s(load_recipe("tiny"));
  EXPECT_EQ(s.total_steps(), 26);
  const int64_t begins[] = {0, 8, 16, 24}, ends[] = {8, 16, 24, 26};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s.stage_begin(i), begins[i]);
    EXPECT_EQ(s.stage_end(i), ends[i]);
  }
  // One slice per call: T = B; R = 128.
  const int64_t T[] = {512, 1024, 1536, 1536}, L[] = {112, 256, 256, 256};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s.at(begins[i]).slice_tokens, T[i]);
    EXPECT_EQ(s.at(begins[i]).cu_rows, 128);
    EXPECT_EQ(s.at(begins[i]).lmax, L[i]);
  }
  EXPECT_EQ(s.total_tokens(), 512 * 8 + 1024 * 8 + 1536 * 8 + 1536 * 2);
  // Windows in 16-token blocks: (1,3) → (3,7) → (5,11) → (6,13); final long 20 blocks.
  EXPECT_EQ(s.at(0).ws_short_tokens, 16);
  EXPECT_EQ(s.at(0).ws_long_tokens, 48);
  EXPECT_EQ(s.at(25).ws_long_tokens, 208);
  EXPECT_EQ(s.at(26).ws_long_tokens, 320);
  const auto events = s.yarn_events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].step, 8);
  EXPECT_EQ(events[0].old_long_tokens, 48);
  EXPECT_EQ(events[0].new_long_tokens, 112);
  EXPECT_EQ(events[2].step, 24);
  EXPECT_EQ(events[2].new_long_tokens, 208);
  // c0 = ⌊24·0.4⌋ = 9, floor 0.15.
  EXPECT_DOUBLE_EQ(s.lr_mult(8), 1.52);
  EXPECT_DOUBLE_EQ(s.lr_mult(9), 1.52);
  EXPECT_NEAR(s.lr_mult(10), 1.52 * 14.0 / 15 + 0.15 / 15, 1e-15);
  EXPECT_NEAR(s.lr_mult(23), 1.73 / 15 + 0.15 * 14 / 15, 1e-15);
  EXPECT_DOUBLE_EQ(s.lr_mult(24), 0.15);
  // Momentum warmup 6 steps, cooldown over the last 2.
  EXPECT_NEAR(s.momentum(5), 0.85 + 0.1 * 5 / 6, 1e-15);
  EXPECT_DOUBLE_EQ(s.momentum(6), 0.95);
  EXPECT_DOUBLE_EQ(s.momentum(24), 0.95);
  EXPECT_NEAR(s.momentum(25), 0.90, 1e-15);
  EXPECT_EQ(s.split_step(), 17);
  EXPECT_EQ(s.validation_steps(), (std::vector<int64_t>{0, 26}));
  // `tiny` skips warmup; with it on, the §9.1 rule gives the stage boundaries of this schedule.
  EXPECT_TRUE(s.warmup_steps().empty());
  Recipe with_warmup = load_recipe("tiny");
  with_warmup.schedule.warmup = true;
  EXPECT_EQ(Schedule(with_warmup).warmup_steps(),
            (std::vector<int64_t>{0, 1, 6, 7, 8, 9, 14, 15, 16, 17, 22, 23, 24, 25}));
}

TEST(MiniSchedule, OneSlicePerStepAndFinalValidationOnly) {
  const Recipe r = load_recipe("mini");
  const Schedule s(r);
  EXPECT_EQ(s.total_steps(), 1285);
  EXPECT_EQ(s.at(0).slice_tokens, 16384);
  EXPECT_EQ(s.at(0).cu_rows, 64);
  EXPECT_EQ(s.at(900).slice_tokens, 49152);
  EXPECT_EQ(s.total_tokens(), 338'821'120 / 8);
  EXPECT_EQ(s.validation_steps(), (std::vector<int64_t>{1285}));
  EXPECT_EQ(r.validation.tokens, 2'097'152);
  EXPECT_EQ(s.split_step(), 847);
}

}  // namespace
}  // namespace gpt
