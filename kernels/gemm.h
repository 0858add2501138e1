#pragma once
// Matrix products, row-major, optionally batched (RECIPE §0.4: bf16 operands, fp32 accumulation, result stored in
// C's dtype). The CUDA implementation goes through cuBLASLt.
//
//   C[b] = alpha · op(A[b]) · op(B[b]) + beta · C[b]
//
// A: [M, K] or [K, M] when trans_a; B: [K, N] or [N, K] when trans_b; C: [M, N]. Any operand may carry one leading
// batch dimension [batch, ...]; a 2-D operand is shared by every batch. A and B have the same dtype (f64, f32 or bf16);
// C has that dtype or f32 (fp32 gradients of bf16 products). beta = 0 ignores C's contents (NaN-safe).
#include "kernels/tensor.h"

namespace gpt {

struct GemmArgs {
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
};

void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmArgs& args = {});

// Shape bookkeeping shared by both backends.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool a_batched = false, b_batched = false, c_batched = false;
};
GemmShape gemm_shape(const Tensor& a, const Tensor& b, const Tensor& c, const GemmArgs& args);

// FP8 product for RECIPE §7:  C = alpha · (scale_a · A) · (scale_b · B)ᵀ + beta · C
//
// A: [M, K], B: [N, K] (both K-contiguous: the only layout the FP8 tensor-core path takes, so x·Wᵀ with W stored
// [out, in]); dtypes e4m3×e4m3, e5m2×e4m3 or e4m3×e5m2 (e5m2×e5m2 has no kernel). C: [M, N] bf16 or f32.
// scale_a, scale_b: f32 [1] tensors on C's device holding the dequantization scales (device pointers on CUDA, so
// delayed scales never need a host sync); on CUDA each must be 16-byte aligned (docs/docs/ANCHORS.md: cuBLASLt refuses
// others), e.g. one tensor of its own or a slice at a multiple of 4 floats.
// fast_accum: the tensor cores' reduced-precision accumulation (§7.1 lm_head); ignored by the CPU reference.
struct Fp8GemmArgs {
  float alpha = 1.0f;
  float beta = 0.0f;
  bool fast_accum = false;
};

void gemm_fp8(const Tensor& a, const Tensor& b, Tensor& c, const Tensor& scale_a, const Tensor& scale_b,
              const Fp8GemmArgs& args = {});

namespace cpu {
void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmArgs& args);
void gemm_fp8(const Tensor& a, const Tensor& b, Tensor& c, const Tensor& scale_a, const Tensor& scale_b,
              const Fp8GemmArgs& args);
}  // namespace cpu
namespace cuda {
void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmArgs& args);
void gemm_fp8(const Tensor& a, const Tensor& b, Tensor& c, const Tensor& scale_a, const Tensor& scale_b,
              const Fp8GemmArgs& args);
}  // namespace cuda

}  // namespace gpt
