#pragma once
// Per-head output gate (RECIPE §2.9 step 9, layers 3 and 10): y_out_th = y_th · gates[t, first_lane + h]
// (the raw lane value, no squashing). y, y_out: [T, H, D]; gates: [T, G] (kernels/gate_lanes.h); one
// floating dtype. The product is formed in the accumulation type and rounded once; y_out may alias y.
// Backward (ADDS; dy is written where write_dy says GradWrite::overwrite): dy_th += gate_th · dy_out_th;
// dgates[t, first_lane + h] += ⟨dy_out_th, y_th⟩ (y = the forward's input).
#include <cstdint>

#include "kernels/grad_write.h"
#include "kernels/tensor.h"

namespace gpt {

void head_gate_forward(const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& y_out);
void head_gate_backward(const Tensor& dy_out, const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& dy,
                        Tensor& dgates, GradWrite write_dy = GradWrite::add);

namespace cpu {
void head_gate_forward(const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& y_out);
void head_gate_backward(const Tensor& dy_out, const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& dy,
                        Tensor& dgates, GradWrite write_dy);
}  // namespace cpu
namespace cuda {
void head_gate_forward(const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& y_out);
void head_gate_backward(const Tensor& dy_out, const Tensor& y, const Tensor& gates, int64_t first_lane, Tensor& dy,
                        Tensor& dgates, GradWrite write_dy);
}  // namespace cuda

}  // namespace gpt
