#pragma once
// Special-function-unit approximations shared by the kernels that trade a few ulp of fp32 for one MUFU op
// (attention softmax, softcap loss), and log2(e) for folding exp(x) into 2^(x·log2 e).
namespace gpt::cuda {

inline constexpr float kLog2e = 1.4426950408889634f;

// 2^x on the special-function unit (ex2.approx, ≈2^-22 relative; 2^-inf = +0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 1/x on the special-function unit (rcp.approx, ≈1 ulp).
__device__ __forceinline__ float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// min(x, hi) and max(x, lo) that keep a NaN x: fminf/fmaxf return the other operand when one is NaN, which would
// turn a NaN logit into a finite loss and hide a diverged run from its non-finite-loss check.
__device__ __forceinline__ float min_keeping_nan(float x, float hi) { return x > hi ? hi : x; }
__device__ __forceinline__ float max_keeping_nan(float x, float lo) { return x < lo ? lo : x; }

}  // namespace gpt::cuda
