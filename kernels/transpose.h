#pragma once
// 2-D transposes used by the optimizer for the tied embedding (RECIPE §4.6): embed ← lm_headᵀ after the tied
// update, grad(lm_head) += grad(embed)ᵀ, and the transposed Adam state at the split.
#include "kernels/tensor.h"

namespace gpt {

// dst = srcᵀ. src: [r, c], dst: [c, r], same floating dtype.
void transpose(const Tensor& src, Tensor& dst);
// dst += srcᵀ, summed in fp32 (double for f64) and rounded once to dst's dtype.
void add_transposed(const Tensor& src, Tensor& dst);

namespace cpu {
void transpose(const Tensor& src, Tensor& dst);
void add_transposed(const Tensor& src, Tensor& dst);
}  // namespace cpu
namespace cuda {
void transpose(const Tensor& src, Tensor& dst);
void add_transposed(const Tensor& src, Tensor& dst);
}  // namespace cuda

}  // namespace gpt
