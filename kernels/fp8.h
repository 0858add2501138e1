#pragma once
// FP8 formats and the emulated FP8 GEMM path (RECIPE §7).
//
// Formats (OCP FP8): e4m3 = 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, NaN = S.1111.111, max finite
// 448, smallest subnormal 2^-9. e5m2 = 1/5 (bias 15)/2; max finite 57344, smallest subnormal 2^-16.
// Conversion from float: round to nearest, ties to even, with saturation [project definition, §7]: any value whose
// magnitude exceeds the largest finite value (infinities included) becomes ±max; NaN stays NaN (0x7F / 0x7F | sign).
//
// Tensor ops:
//   quantize_fp8(x, scale, q):   q = fp8(x / scale), q of dtype e4m3 or e5m2, scale an f32 [1] tensor (on the device,
//                                so delayed scales never leave it). Division by the scale is done in fp32.
//   dequantize_fp8(q, scale, x): x = float(q) · scale, rounded into x's dtype.
//   amax(x, out):                out[0] = max |x| (f32 [1], overwritten); NaN propagates.
//   relu_square_quantize_fp8(pre, scale, post, q, post_max): the §7.2 activation in one pass: post = relu(pre)²
//                                rounded to post's dtype, q = fp8(post / scale), post_max[0] = max |post| (f32 [1],
//                                overwritten): exactly relu_square_forward, quantize_fp8 and amax in sequence.
//   scale_from_amax(amax, factor, floor, scale): scale[0] = max(amax[0], floor)·factor (f32 [1] tensors), the
//                                device-side step from a measured amax to a quantization scale.
//   amax_scale(x, factor, floor, scale): scale[0] = max(max |x|, floor)·factor: amax and scale_from_amax in one op
//                                (on CUDA one kernel, whose last block writes the scale), the same bits.
//   fp8_gemm(a8, b8, a_scale, b_scale, c, args, accumulation): C = (A8·B8)·a_scale·b_scale with gemm.h's layout
//                                rules (2-D only; trans flags, alpha, beta); C f32 or bf16. The CPU path dequantizes
//                                the operands to f32 (exact) and calls gemm (exact fp32 accumulation, `accumulation`
//                                ignored). The CUDA path is cuBLASLt's FP8 GEMM (gemm_fp8) with the scales as its A/B
//                                scale pointers; an operand that is not K-contiguous (trans_a, or B without trans_b)
//                                is first copied K-contiguous by a byte transpose, the only layout FP8 tensor cores
//                                take. Where cuBLASLt's FP8 constraints do not hold (M, N or K not a multiple of 16,
//                                an operand or scale not 16-byte aligned) it widens the operands to bf16 (exact) and
//                                runs the bf16 GEMM into an fp32 scratch instead.
// The §7.1/§7.2 compositions (lm_head and MLP) live in kernels/fp8_linear.h.
#include <cstdint>

#include "kernels/gemm.h"
#include "kernels/tensor.h"

namespace gpt {

inline constexpr float kE4m3Max = 448.0f;
inline constexpr float kE5m2Max = 57344.0f;

uint8_t float_to_e4m3(float v);
uint8_t float_to_e5m2(float v);
float e4m3_to_float(uint8_t bits);
float e5m2_to_float(uint8_t bits);
// By dtype (e4m3 or e5m2).
uint8_t float_to_fp8(float v, DType format);
float fp8_to_float(uint8_t bits, DType format);
bool is_fp8(DType dtype);

void quantize_fp8(const Tensor& x, const Tensor& scale, Tensor& q);
void dequantize_fp8(const Tensor& q, const Tensor& scale, Tensor& x);
void amax(const Tensor& x, Tensor& out);
void scale_from_amax(const Tensor& amax, float factor, float floor, Tensor& scale);
void amax_scale(const Tensor& x, float factor, float floor, Tensor& scale);
void relu_square_quantize_fp8(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max);
// Accumulation of the FP8 tensor-core product: full (fp32 promotion, the default) or the tensor cores' fast,
// reduced-precision mode that §7.1 and §7.2 name for their forward products.
enum class Fp8Accumulation : uint8_t { full, fast };

void fp8_gemm(const Tensor& a8, const Tensor& b8, const Tensor& a_scale, const Tensor& b_scale, Tensor& c,
              const GemmArgs& args = {}, Fp8Accumulation accumulation = Fp8Accumulation::full);

namespace cpu {
void quantize_fp8(const Tensor& x, const Tensor& scale, Tensor& q);
void dequantize_fp8(const Tensor& q, const Tensor& scale, Tensor& x);
void amax(const Tensor& x, Tensor& out);
void scale_from_amax(const Tensor& amax, float factor, float floor, Tensor& scale);
void amax_scale(const Tensor& x, float factor, float floor, Tensor& scale);
void relu_square_quantize_fp8(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max);
void fp8_gemm(const Tensor& a8, const Tensor& b8, const Tensor& a_scale, const Tensor& b_scale, Tensor& c,
              const GemmArgs& args, Fp8Accumulation accumulation);
}  // namespace cpu
namespace cuda {
void quantize_fp8(const Tensor& x, const Tensor& scale, Tensor& q);
void dequantize_fp8(const Tensor& q, const Tensor& scale, Tensor& x);
void amax(const Tensor& x, Tensor& out);
void scale_from_amax(const Tensor& amax, float factor, float floor, Tensor& scale);
void amax_scale(const Tensor& x, float factor, float floor, Tensor& scale);
void relu_square_quantize_fp8(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max);
void fp8_gemm(const Tensor& a8, const Tensor& b8, const Tensor& a_scale, const Tensor& b_scale, Tensor& c,
              const GemmArgs& args, Fp8Accumulation accumulation);
}  // namespace cuda

}  // namespace gpt
