// The steps train_step_bench times (trainer/bench/step_bench_shapes.h).
#include "trainer/bench/step_bench_shapes.h"

#include <gtest/gtest.h>

#include "trainer/recipe/recipe.h"

namespace gpt {
namespace {

void expect_inside_its_stage(const Schedule& schedule, const StepBenchShape& shape) {
  SCOPED_TRACE(shape.name);
  EXPECT_EQ(shape.schedule_step % 2, 0) << "the bench alternates an even step and the odd one after it";
  EXPECT_EQ(schedule.stage_of(shape.schedule_step), shape.stage);
  EXPECT_EQ(schedule.stage_of(shape.schedule_step + 1), shape.stage);
  EXPECT_EQ(shape.name, "stage" + std::to_string(shape.stage));
}

// `head` keeps the steps of the bench's history: 300, 600 and 1000, one per scheduled stage, none in the extension.
TEST(StepBenchShapes, HeadIsTimedAtItsHistorySteps) {
  const Schedule schedule(load_recipe("head"));
  const std::vector<StepBenchShape> shapes = step_bench_shapes(schedule);
  ASSERT_EQ(shapes.size(), 3u);
  const int64_t steps[] = {300, 600, 1000};
  for (size_t k = 0; k < shapes.size(); ++k) {
    EXPECT_EQ(shapes[k].schedule_step, steps[k]);
    expect_inside_its_stage(schedule, shapes[k]);
  }
  EXPECT_GE(shapes[2].schedule_step, schedule.split_step()) << "stage 2 is timed after the lm_head split";
}

// `ext` (§S) has four scheduled stages on a 1122-step schedule: every one gets a row inside it, the fourth (the
// taper) at its middle step.
TEST(StepBenchShapes, ExtGetsOneRowPerScheduledStage) {
  const Schedule schedule(load_recipe("ext"));
  const std::vector<StepBenchShape> shapes = step_bench_shapes(schedule);
  ASSERT_EQ(static_cast<int>(shapes.size()), schedule.num_stages() - 1);
  for (const StepBenchShape& shape : shapes) expect_inside_its_stage(schedule, shape);
  const StepBenchShape& last = shapes.back();
  const int64_t begin = schedule.stage_begin(last.stage), end = schedule.stage_end(last.stage);
  EXPECT_NEAR(static_cast<double>(last.schedule_step), static_cast<double>(begin + end) / 2, 1.0);
}

// A stage too short for an even step and its odd successor is left out rather than timed across a boundary.
TEST(StepBenchShapes, StagesWithoutAnEvenOddPairAreLeftOut) {
  // Stages [0, 2), [2, 5), [5, 7): the third holds only the odd step 5 and the even step 6, whose successor 7 is
  // the extension's first.
  const Schedule schedule(load_recipe("tiny", {"schedule.num_scheduled=7", "schedule.num_extension=2"}));
  ASSERT_EQ(schedule.stage_begin(2), 5);
  ASSERT_EQ(schedule.stage_end(2), 7);
  const std::vector<StepBenchShape> shapes = step_bench_shapes(schedule);
  ASSERT_EQ(shapes.size(), 2u);
  for (const StepBenchShape& shape : shapes) expect_inside_its_stage(schedule, shape);
  EXPECT_EQ(shapes[1].name, "stage1");
}

}  // namespace
}  // namespace gpt
