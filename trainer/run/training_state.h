#pragma once
// The complete mutable state of a run as named tensors (RECIPE §9.1): model parameters, model buffers and the
// rank's optimizer state, plus the gradient buffers (Adam gradients accumulate over two steps, §4.1, so a
// checkpoint after an even step holds half of the next update). One list serves the warmup snapshot/reset, the
// bitwise reset test and checkpoints.
// Names: "param/NAME", "grad/NAME", "buffer/NAME", "adam/NAME/m|v", "bank/NAME/momentum|second_moment|mantissa"
// (NorMuon) or "bank/NAME/fast_rail|slow_rail|second_moment|mantissa" (ANVIL, recipe.extensions.bank_opt = anvil).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainer/optim/optimizer.h"
#include "trainer/step/trainable_model.h"

namespace gpt {

// Handles sharing storage with the live tensors, in a fixed order.
std::vector<NamedTensor> collect_state(TrainableModel& model, const Optimizer& optimizer);

// Deep copies (the snapshot of §9.1).
std::vector<NamedTensor> clone_state(const std::vector<NamedTensor>& state);

// Copies `saved` into `live` (same names, shapes and dtypes, in any order); throws naming the first mismatch.
// `what` names the source in messages (e.g. the checkpoint file).
void restore_state(const std::vector<NamedTensor>& live, const std::vector<NamedTensor>& saved,
                   const std::string& what);

// Name of the first tensor whose bytes differ between `a` and `b`, or "" when they are bitwise equal.
std::string first_difference(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b);

// The optimizer's step counters (by Adam parameter name) and tie, saved beside the tensors.
struct OptimizerCounters {
  std::map<std::string, int64_t> adam_steps;
  bool tied = true;
};
OptimizerCounters read_counters(TrainableModel& model, const Optimizer& optimizer);

}  // namespace gpt
