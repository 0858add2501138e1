#pragma once
// What a diverged run says about where its non-finite value lives. Each floating tensor of the run's state (model
// parameters and gradients, optimizer state, tail accumulators, the n-gram table) is tested through its sum of
// squares, which is non-finite exactly when an element is (bf16 and f32 squares cannot overflow a double; for f64
// state a magnitude above 1e154 also counts). The test reads every byte once on the tensor's device and runs only
// after the loss went non-finite, never on a finished run's clock.
#include <string>
#include <vector>

#include "trainer/model/named_tensor.h"

namespace gpt {

// Which floating tensors of a state list were tested and which of them hold a non-finite element (list order).
// Scanning reads every tested byte once; describe and count from the scan.
struct StateScan {
  std::vector<std::string> tested;
  std::vector<std::string> nonfinite;
};
StateScan scan_state(const std::vector<NamedTensor>& state);

// Names of the floating tensors of `state` holding a non-finite element, in list order.
std::vector<std::string> nonfinite_tensors(const std::vector<NamedTensor>& state);

// One sentence for the run's log and error, by the names' first part (param, grad, buffer, adam, bank, tail,
// ngram): "non-finite state: param 1 of 13 (lm_head); grad 19 of 20 (embed, ... and 11 more); finite: adam 26,
// bank 12", at most `max_names` names per group; or "every one of the 77 floating state tensors is finite (param 13,
// ...): the non-finite value arose in the computation" when none is.
std::string describe_nonfinite_state(const StateScan& scan, size_t max_names = 8);
std::string describe_nonfinite_state(const std::vector<NamedTensor>& state, size_t max_names = 8);

}  // namespace gpt
