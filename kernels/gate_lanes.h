#pragma once
// Per-token, per-head gate values read as a column range of a lane tensor (the gate MLP outputs of
// RECIPE §2.6: gates [T, G], head h of token t reads gates[t, first_lane + h]). Lets XSA, the output gate
// and the DC correction read their lanes in place, and their backwards add into the same columns of the
// lane gradient, without gather/scatter copies.
#include <cstdint>

#include "kernels/tensor.h"

namespace gpt {

inline void check_gate_lanes(const Tensor& gates, int64_t tokens, int64_t heads, int64_t first_lane, DType dtype,
                             const char* op) {
  GPT_CHECK(gates.ndim() == 2 && gates.size(0) == tokens, op, ": gates must be [T = ", tokens, ", G], got ",
            gates.describe());
  GPT_CHECK(first_lane >= 0 && first_lane + heads <= gates.size(1), op, ": lanes [", first_lane, ", ",
            first_lane + heads, ") do not fit gates with ", gates.size(1), " lanes");
  check_dtype(gates, dtype, op);
}

}  // namespace gpt
