#pragma once
// Two tapes of the same model (the CUDA backend against the CPU reference, or CPU bf16 against CPU f64) walked
// backward in lockstep with Tape::backward_last: after each step the op's forward output, the gradient it consumed
// and every input gradient it wrote are compared (relative Frobenius error, the reference tape second). The table
// goes to stdout, so a failing model comparison names the first op that disagrees.
#include <cstddef>
#include <string>
#include <vector>

#include "trainer/model/tape.h"

namespace gpt::testing {

struct LockstepStep {
  size_t index = 0;  // position on the tape (the last recorded op has the highest index and runs first)
  std::string label;
  double value_error = 0;  // the op's forward output
  double dout_error = 0;   // the gradient the op consumed
  double input_error = 0;  // worst input gradient the op wrote
  size_t worst_input = 0;  // its position in TapeStep::vars
};

// Steps in backward order (the loss first).
using LockstepReport = std::vector<LockstepStep>;

// Relative Frobenius error ‖a − b‖ / ‖b‖; 0 when both are equal, +inf for a non-finite a or differing sizes.
double relative_error(const std::vector<double>& a, const std::vector<double>& b);

// Replays both tapes to the end. They must record the same ops in the same order (a mismatch fails the test).
LockstepReport walk_tapes_in_lockstep(Tape& test, Tape& reference);

// The first step (backward order) with any error past its tolerance, described; empty when there is none.
std::string first_step_over(const LockstepReport& report, double value_tol, double dout_tol, double input_tol);

// The first step whose errors exceed `factor` × the baseline's at the same step plus `floor`, described; empty
// when there is none. The baseline is a second walk against the same reference (e.g. CPU bf16 against CPU f64
// while `report` is CUDA bf16 against CPU f64): it measures what the precision alone costs at each op.
std::string first_step_worse_than(const LockstepReport& report, const LockstepReport& baseline, double factor,
                                  double floor);

}  // namespace gpt::testing
