// The arithmetic of train_step_bench --kernel-trace (trainer/bench/kernel_timeline.h): per-name totals, the union of
// overlapping activities, idle gaps and what ran on either side of them.
#include "trainer/bench/kernel_timeline.h"

#include <gtest/gtest.h>

namespace gpt {
namespace {

ActivityInterval kernel(const std::string& name, uint64_t start_us, uint64_t end_us) {
  return {ActivityKind::kernel, name, start_us * 1000, end_us * 1000};
}

TEST(KernelTimeline, EmptyTraceHasNoWork) {
  const TimelineSummary s = summarize_timeline({});
  EXPECT_EQ(s.kernels, 0);
  EXPECT_EQ(s.busy_ms, 0.0);
  EXPECT_EQ(s.span_ms, 0.0);
  EXPECT_TRUE(s.top.empty());
  EXPECT_TRUE(s.longest_gaps.empty());
}

TEST(KernelTimeline, BackToBackKernelsLeaveNoIdle) {
  const TimelineSummary s = summarize_timeline({kernel("a", 0, 100), kernel("b", 100, 250)});
  EXPECT_DOUBLE_EQ(s.busy_ms, 0.25);
  EXPECT_DOUBLE_EQ(s.span_ms, 0.25);
  EXPECT_DOUBLE_EQ(s.idle_in_span_ms, 0.0);
  ASSERT_EQ(s.longest_gaps.size(), 0u);
}

// Two streams: overlapping activities count once in busy time, twice in the activity sum.
TEST(KernelTimeline, OverlapCountsOnceInBusyTime) {
  const TimelineSummary s = summarize_timeline({kernel("a", 0, 100), kernel("b", 50, 120), kernel("c", 60, 80)});
  EXPECT_DOUBLE_EQ(s.activity_ms, 0.19);
  EXPECT_DOUBLE_EQ(s.busy_ms, 0.12);
  EXPECT_DOUBLE_EQ(s.idle_in_span_ms, 0.0);
}

// Gaps are measured from the end of the busy run (not of its last-starting activity) and name what bounds them.
TEST(KernelTimeline, GapsNameTheWorkOnEitherSide) {
  const TimelineSummary s = summarize_timeline(
      {kernel("late", 300, 310), kernel("long", 0, 100), kernel("short", 10, 20), kernel("next", 103, 200)}, 30, 10,
      5.0);
  EXPECT_DOUBLE_EQ(s.busy_ms, 0.207);
  EXPECT_DOUBLE_EQ(s.span_ms, 0.31);
  EXPECT_NEAR(s.idle_in_span_ms, 0.103, 1e-12);
  ASSERT_EQ(s.longest_gaps.size(), 2u);
  EXPECT_DOUBLE_EQ(s.longest_gaps[0].us, 100.0);
  EXPECT_EQ(s.longest_gaps[0].before, "next");
  EXPECT_EQ(s.longest_gaps[0].after, "late");
  EXPECT_DOUBLE_EQ(s.longest_gaps[1].us, 3.0);
  EXPECT_EQ(s.longest_gaps[1].before, "long") << "the run ends with the activity that ends last, not starts last";
  EXPECT_EQ(s.idle_gaps_over_threshold, 1) << "the 3 us gap is under the 5 us threshold";
  EXPECT_DOUBLE_EQ(s.idle_over_threshold_ms, 0.1);
}

TEST(KernelTimeline, TotalsPerNameLongestFirstAndCountedByKind) {
  std::vector<ActivityInterval> in = {kernel("gemm", 0, 50),
                                      kernel("norm", 50, 60),
                                      kernel("gemm", 60, 110),
                                      {ActivityKind::memcpy, "[memcpy HtoD]", 110'000, 115'000},
                                      {ActivityKind::memset, "[memset]", 115'000, 116'000}};
  const TimelineSummary s = summarize_timeline(in, 2);
  EXPECT_EQ(s.kernels, 3);
  EXPECT_EQ(s.copies, 1);
  EXPECT_EQ(s.memsets, 1);
  ASSERT_EQ(s.top.size(), 2u) << "top_n caps the table";
  EXPECT_EQ(s.top[0].name, "gemm");
  EXPECT_EQ(s.top[0].count, 2);
  EXPECT_DOUBLE_EQ(s.top[0].ms, 0.1);
  EXPECT_EQ(s.top[1].name, "norm");
}

TEST(KernelTimeline, RejectsAnIntervalThatEndsBeforeItStarts) {
  EXPECT_THROW(summarize_timeline({kernel("bad", 10, 5)}), std::invalid_argument);
}

}  // namespace
}  // namespace gpt
