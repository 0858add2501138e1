#pragma once
// Numbered versions of the CUDA fused §7.2 activation (relu_square_quantize_fp8, kernels/fp8.h): the public op
// runs v2; the GPU tests check both against the CPU reference bit for bit and ops_a_cuda_bench times them side by
// side at the recipe's MLP shape. What each version does is written beside its kernel in kernels/cuda/fp8.cu.
#include "kernels/tensor.h"

namespace gpt::cuda {

void relu_square_quantize_fp8_v1(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max);
void relu_square_quantize_fp8_v2(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max);

}  // namespace gpt::cuda
