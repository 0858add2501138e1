#pragma once
// Numbered versions of the CUDA FP8 kernels that have more than one: the fused §7.2 activation
// (relu_square_quantize_fp8, kernels/fp8.h; versions beside the kernel in kernels/cuda/fp8.cu) and the byte
// transpose fp8_gemm applies to operands stored the other way (kernels/cuda/fp8_transpose.cu). The public ops run
// v2 of both; the GPU tests check every version against the CPU bit for bit and ops_a_cuda_bench times them side
// by side at the recipe's shapes.
#include "kernels/tensor.h"

namespace gpt::cuda {

void relu_square_quantize_fp8_v1(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max);
void relu_square_quantize_fp8_v2(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max);

inline constexpr int kPromotedFp8Transpose = 2;
// [cols, rows] copy of a row-major fp8 [rows, cols] CUDA matrix (rows and cols multiples of 4) through the given
// version (v2 needs multiples of 16 and runs v1 otherwise).
Tensor transpose_fp8_bytes(const Tensor& q, int version = kPromotedFp8Transpose);

}  // namespace gpt::cuda
