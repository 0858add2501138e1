#pragma once
// The training steps train_step_bench times for a recipe: one shape per scheduled stage (the extension stage
// repeats the last stage's shapes and is left out), each at a step inside the stage whose windows, MTP weights,
// prefix weight and lm_head split are the stage's. Plain C++ so the CPU tests check the choice
// (tests/bench/step_bench_shapes_test.cpp).
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "trainer/schedule/schedule.h"

namespace gpt {

struct StepBenchShape {
  std::string name;       // "stage<k>"
  int stage = 0;          // index into the recipe's stages
  int64_t schedule_step;  // an even step of that stage (the bench alternates it with the odd step after it)
};

// The `head` steps of the first bench rows (300, 600, 1000: stages 0, 1 and 2 of the 1270-step schedule, the last
// after the lm_head split). A recipe whose stage k holds the k-th of them is timed there, so rows of recipes that
// share `head`'s schedule stay comparable with the history; any other stage is timed at its middle step
// (rounded down to even), where step s + 1 is still inside it.
inline std::vector<StepBenchShape> step_bench_shapes(const Schedule& schedule) {
  constexpr int64_t kHeadSteps[] = {300, 600, 1000};
  std::vector<StepBenchShape> shapes;
  const int scheduled = schedule.num_stages() - 1;  // the last stage is the extension (§5)
  for (int k = 0; k < scheduled; ++k) {
    const int64_t begin = schedule.stage_begin(k), end = schedule.stage_end(k);
    int64_t step = (begin + (end - begin) / 2) / 2 * 2;
    if (step < begin) step += 2;
    if (k < static_cast<int>(std::size(kHeadSteps)) && kHeadSteps[k] >= begin && kHeadSteps[k] + 1 < end) {
      step = kHeadSteps[k];
    }
    if (step + 1 >= end) continue;  // no even step with its odd successor inside the stage
    shapes.push_back({"stage" + std::to_string(k), k, step});
  }
  return shapes;
}

}  // namespace gpt
