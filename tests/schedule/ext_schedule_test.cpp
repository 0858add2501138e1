// The `ext` profile's schedule (RECIPE §S.1, §S.2 cadence, §S.4 P, §S.10 warmup, §S.11 log lines) for ext
// (N = 1194) and tiny-ext. Expected values are §S's figures or formulas evaluated here, not by the schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "base/check.h"
#include "tests/common/error_of.h"
#include "trainer/schedule/schedule.h"

namespace gpt {
namespace {

using test::error_of;

std::vector<int64_t> range(int64_t lo, int64_t hi_inclusive) {
  std::vector<int64_t> out;
  for (int64_t s = lo; s <= hi_inclusive; ++s) out.push_back(s);
  return out;
}

class ExtSchedule : public ::testing::Test {
 protected:
  Schedule sched{load_recipe("ext")};
};

TEST_F(ExtSchedule, StageBoundariesWithGrowthAndTaper) {
  EXPECT_EQ(sched.total_steps(), 1194);
  EXPECT_EQ(sched.main_steps(), 1174);
  ASSERT_EQ(sched.num_stages(), 5);
  const int64_t begins[] = {0, 320, 681, 1107, 1174}, ends[] = {320, 681, 1107, 1174, 1194};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(sched.stage_begin(i), begins[i]) << i;
    EXPECT_EQ(sched.stage_end(i), ends[i]) << i;
  }
  EXPECT_EQ(sched.stage_of(1106), 2);
  EXPECT_EQ(sched.stage_of(1107), 3);
  EXPECT_EQ(sched.stage_of(1194), 4);
}

TEST_F(ExtSchedule, TotalTokensAndSliceRows) {
  EXPECT_EQ(sched.total_tokens(), 328'663'040);
  // §S.1: T = 40,960 of the taper gets R = 128; the others follow §1.4.
  EXPECT_EQ(sched.at(0).cu_rows, 64);
  EXPECT_EQ(sched.at(320).cu_rows, 96);
  EXPECT_EQ(sched.at(681).cu_rows, 128);
  EXPECT_EQ(sched.at(1107).slice_tokens, 40960);
  EXPECT_EQ(sched.at(1107).cu_rows, 128);
  EXPECT_EQ(sched.at(1174).cu_rows, 64);
}

TEST_F(ExtSchedule, LearningRateCooldownOverTheMainSteps) {
  const int64_t main_steps = 1174;
  const auto c0 = static_cast<int64_t>(std::floor(1174 * 0.2));  // 234
  ASSERT_EQ(c0, 234);
  auto expected = [&](int64_t s) {
    const double lr_mul = s < 320 ? 1.0 : s < 681 ? 1.52 : s < 1107 ? 1.73 : 1.73 * std::sqrt(20.0 / 24.0);
    if (s < c0) return lr_mul;
    const double t = std::min(1.0, static_cast<double>(s - c0) / static_cast<double>(main_steps - c0));
    return lr_mul * (1 - t) + 0.30 * t;
  };
  for (int64_t s : {0, 233, 234, 704, 1106, 1107, 1173, 1174, 1193, 1194}) {
    EXPECT_NEAR(sched.lr_mult(s), expected(s), 1e-12) << s;
  }
  EXPECT_DOUBLE_EQ(sched.lr_mult(233), 1.0);
  EXPECT_DOUBLE_EQ(sched.lr_mult(1174), 0.30);
}

TEST_F(ExtSchedule, SteppedPrefixWeight) {
  const std::vector<std::pair<int64_t, double>> expected = {
      {0, 0.25},   {319, 0.25}, {320, 0.20}, {410, 0.20}, {411, 0.15}, {500, 0.15}, {501, 0.10},
      {590, 0.10}, {591, 0.05}, {680, 0.05}, {681, 0.0},  {1193, 0.0}, {1194, 0.0}};
  for (const auto& [s, w] : expected) EXPECT_DOUBLE_EQ(sched.prefix_weight(s), w) << s;
  // index = min(k−1, ⌊k·(s−a)/(b−a)⌋) with k = 4 over [320, 681): the weight changes exactly at 411, 501, 591.
  std::vector<int64_t> changes;
  for (int64_t s = 321; s < 681; ++s) {
    if (sched.prefix_weight(s) != sched.prefix_weight(s - 1)) changes.push_back(s);
  }
  EXPECT_EQ(changes, (std::vector<int64_t>{411, 501, 591}));
  EXPECT_EQ(sched.mtp_weights(0), (std::vector<double>{1.0, 0.5, 0.25}));
  EXPECT_EQ(sched.mtp_weights(320).size(), 2u);
}

TEST_F(ExtSchedule, SampledSoftmaxSize) {
  const std::vector<std::pair<int64_t, int64_t>> expected = {
      {0, 10240},    {319, 10240}, {320, 10240}, {680, 10240}, {681, 14336}, {964, 14336}, {965, 24576},
      {1106, 24576}, {1107, 0},    {1173, 0},    {1174, 0},    {1193, 0},    {1194, 0}};
  for (const auto& [s, p] : expected) {
    EXPECT_EQ(sched.sampled_softmax_size(s), p) << s;
    EXPECT_EQ(sched.at(s).sampled_softmax, p) << s;
  }
}

TEST_F(ExtSchedule, NgramEventCadence) {
  std::vector<int64_t> events;
  for (int64_t s = 0; s <= 1194; ++s) {
    if (sched.is_ngram_event(s)) events.push_back(s);
    EXPECT_EQ(sched.at(s).ngram_event, sched.is_ngram_event(s)) << s;
  }
  EXPECT_EQ(events.size(), 382u);
  EXPECT_EQ(std::count_if(events.begin(), events.end(), [](int64_t s) { return s < 336; }), 168);
  EXPECT_EQ(events.back(), 1191);
  for (int64_t s : events) {
    EXPECT_TRUE(s < 336 ? s % 2 == 1 : s % 4 == 3) << s;
  }
  // Off with the table.
  const Schedule off(load_recipe("ext", {"extensions.ngram_rows=0", "extensions.value_embeds_on_cadence=false"}));
  for (int64_t s = 0; s <= 1194; ++s) EXPECT_FALSE(off.is_ngram_event(s)) << s;
}

TEST_F(ExtSchedule, WarmupStepsOfSectionS10) {
  std::vector<int64_t> expected = {0, 1};
  for (int64_t b : {320, 681, 965, 1107}) {
    for (int64_t s : range(b - 2, b + 1)) expected.push_back(s);
  }
  for (int64_t s : range(1172, 1178)) expected.push_back(s);
  ASSERT_EQ(expected.size(), 25u);
  EXPECT_EQ(sched.warmup_steps(), expected);
  // Without the switch: §9.1's list (stage starts only); without warmup: none.
  const Schedule plain(load_recipe("ext", {"extensions.warmup_list=false"}));
  EXPECT_EQ(plain.warmup_steps().size(), 18u);
  EXPECT_TRUE(Schedule(load_recipe("ext", {"schedule.warmup=false"})).warmup_steps().empty());
}

TEST_F(ExtSchedule, GraphKeysAreCoveredByTheWarmup) {
  std::set<StepGraphKey> keys;
  const std::vector<int64_t> warmup = sched.warmup_steps();
  for (int64_t s = 0; s < 1194; ++s) {
    if (keys.insert(sched.graph_key(s)).second) {
      EXPECT_TRUE(std::binary_search(warmup.begin(), warmup.end(), s)) << s;
      EXPECT_TRUE(std::binary_search(warmup.begin(), warmup.end(), s + 1)) << s + 1;
    }
  }
  EXPECT_EQ(keys.size(), 6u);  // stages 0, 1, 2 at two P values, taper, extension
  EXPECT_EQ(sched.graph_key(681).max_segment, 2560);
  EXPECT_EQ(sched.graph_key(0).max_segment, 896);
}

TEST_F(ExtSchedule, WarmupOfMoreThan40StepsIsAnError) {
  const Schedule many(
      load_recipe("ext", {"schedule.stages.0.sampled_softmax=[2048, 4096, 2048, 4096, 2048, 4096, 2048, 4096]"}));
  const std::string msg = error_of([&] { (void)many.warmup_steps(); });
  EXPECT_NE(msg.find("more than 40"), std::string::npos) << msg;
}

TEST_F(ExtSchedule, TrainingLogLines) {
  std::vector<int64_t> expected;
  for (int64_t s = 24; s < 1194; s += 25) expected.push_back(s);
  expected.push_back(1192);
  expected.push_back(1193);
  std::vector<int64_t> logged;
  for (int64_t s = 0; s < 1194; ++s) {
    if (sched.logs_training_line(s)) logged.push_back(s);
    EXPECT_EQ(sched.at(s).log_line, sched.logs_training_line(s)) << s;
  }
  EXPECT_EQ(logged, expected);
  EXPECT_EQ(logged.front(), 24);
  EXPECT_EQ(logged[logged.size() - 3], 1174);
  EXPECT_FALSE(sched.at(1194).log_line);
  EXPECT_THROW((void)sched.logs_training_line(1194), Error);
}

TEST_F(ExtSchedule, SplitValidationAndSegmentCap) {
  EXPECT_EQ(sched.split_step(), 1175);
  EXPECT_TRUE(sched.at(1175).split_step);
  EXPECT_TRUE(sched.at(1175).tied);
  EXPECT_FALSE(sched.at(1176).tied);
  EXPECT_EQ(sched.validation_steps(), (std::vector<int64_t>{1194}));
  const ValidationWindows final_windows = sched.validation_windows(1194);
  EXPECT_EQ(final_windows.ws_long_tokens, 20 * 128);
  EXPECT_FALSE(final_windows.yarn);
  for (int64_t s : {0, 700, 1193, 1194}) EXPECT_EQ(sched.at(s).segment_cap, 2560) << s;
  // YaRN at the long-window changes 320, 681, 1174 (none at the taper: same windows).
  std::vector<int64_t> yarn;
  for (const YarnEvent& e : sched.yarn_events()) yarn.push_back(e.step);
  EXPECT_EQ(yarn, (std::vector<int64_t>{320, 681, 1174}));
}

// growth_stage picks the first stage end that grows: from stage 3 only the taper's end moves.
TEST(ExtScheduleGrowth, GrowthStageSelectsTheEndsThatMove) {
  const Schedule s(load_recipe("ext", {"schedule.growth_stage=3"}));
  EXPECT_EQ(s.stage_end(2), 1055);
  EXPECT_EQ(s.stage_end(3), 1174);
  EXPECT_EQ(s.total_steps(), 1194);
  const Schedule none(load_recipe("ext", {"schedule.growth_steps=0"}));
  EXPECT_EQ(none.stage_end(2), 1055);
  EXPECT_EQ(none.total_steps(), 1142);
  EXPECT_EQ(static_cast<int64_t>(std::floor(1122 * 0.2)), 224);
  // Without growth the cooldown spans the 1122 scheduled steps: c0 = ⌊1122·0.2⌋ = 224.
  EXPECT_DOUBLE_EQ(none.lr_mult(224), 1.0);
  const double t = (500.0 - 224.0) / (1122.0 - 224.0);
  EXPECT_NEAR(none.lr_mult(500), 1.52 * (1 - t) + 0.30 * t, 1e-12);
}

// Head keeps its behaviour: no sampled softmax, no events, every line, no cap.
TEST(ExtScheduleHead, SwitchesOffLeaveHeadUnchanged) {
  const Schedule head(load_recipe("head"));
  for (int64_t s = 0; s <= head.total_steps(); ++s) {
    const StepSchedule st = head.at(s);
    EXPECT_EQ(st.sampled_softmax, 0);
    EXPECT_FALSE(st.ngram_event);
    EXPECT_EQ(st.segment_cap, 0);
    EXPECT_EQ(st.log_line, s < head.total_steps());
  }
  EXPECT_EQ(head.main_steps(), 1270);
}

TEST(TinyExtSchedule, EveryFeatureHappensWithinTheRun) {
  const Schedule s(load_recipe("tiny-ext"));
  EXPECT_EQ(s.total_steps(), 32);
  const int64_t begins[] = {0, 7, 16, 26, 28}, ends[] = {7, 16, 26, 28, 32};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(s.stage_begin(i), begins[i]) << i;
    EXPECT_EQ(s.stage_end(i), ends[i]) << i;
  }
  EXPECT_EQ(s.split_step(), 29);
  std::vector<int64_t> events, lines, prefix_changes, p_changes;
  for (int64_t k = 0; k < 32; ++k) {
    if (s.is_ngram_event(k)) events.push_back(k);
    if (s.logs_training_line(k)) lines.push_back(k);
    if (k > 0 && s.prefix_weight(k) != s.prefix_weight(k - 1)) prefix_changes.push_back(k);
    if (k > 0 && s.sampled_softmax_size(k) != s.sampled_softmax_size(k - 1)) p_changes.push_back(k);
  }
  EXPECT_EQ(events, (std::vector<int64_t>{1, 3, 5, 7, 11, 15, 19, 23, 27, 31}));
  EXPECT_EQ(lines, (std::vector<int64_t>{4, 9, 14, 19, 24, 29, 30, 31}));
  EXPECT_EQ(prefix_changes, (std::vector<int64_t>{7, 10, 12, 14, 16}));
  EXPECT_EQ(p_changes, (std::vector<int64_t>{23, 26}));
  EXPECT_EQ(s.sampled_softmax_size(0), 2048);
  EXPECT_EQ(s.sampled_softmax_size(23), 4096);
  EXPECT_EQ(s.warmup_steps(),
            (std::vector<int64_t>{0, 1, 5, 6, 7, 8, 14, 15, 16, 17, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}));
  // Cooldown from ⌊28·0.2⌋ = 5 to the floor at 28.
  EXPECT_DOUBLE_EQ(s.lr_mult(4), 1.0);
  EXPECT_NEAR(s.lr_mult(10), 1.52 * (1 - 5.0 / 23) + 0.30 * 5.0 / 23, 1e-12);
  EXPECT_DOUBLE_EQ(s.lr_mult(28), 0.30);
  EXPECT_EQ(s.at(20).segment_cap, 320);
}

}  // namespace
}  // namespace gpt
