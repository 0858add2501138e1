#pragma once
// FP8 conversions of the CUDA ops that write or read e4m3 / e5m2 (fp8 quantizers, the softcapped loss): bit for
// bit the conversions of kernels/fp8.h.
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/device_utils.cuh"

namespace gpt::cuda {

// float -> e4m3 / e5m2: round to nearest even, saturating (infinities too), NaN -> sign | 0x7F (kernels/fp8.h).
template <bool kE5m2>
__device__ __forceinline__ uint8_t float_to_fp8_device(float v) {
  const uint8_t sign = signbit(v) ? 0x80 : 0x00;
  if (isnan(v)) return static_cast<uint8_t>(sign | 0x7F);
  const float max_finite = kE5m2 ? 57344.0f : 448.0f;
  if (isinf(v)) v = copysignf(max_finite, v);
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, kE5m2 ? __NV_E5M2 : __NV_E4M3));
}

// VEC floats to e4m3 / e5m2, two per cvt (an odd last one alone); bit-identical to float_to_fp8_device (satfinite
// clamps ±inf to the largest finite value as the helper does; a pair holding a NaN takes the helper for its
// sign | 0x7F encoding).
template <bool kE5m2, int VEC>
__device__ __forceinline__ Pack<uint8_t, VEC> fp8_pack(const float (&v)[VEC]) {
  Pack<uint8_t, VEC> out;
  if constexpr (VEC % 2 == 1) out.v[VEC - 1] = float_to_fp8_device<kE5m2>(v[VEC - 1]);
#pragma unroll
  for (int j = 0; j + 1 < VEC; j += 2) {
    if (isnan(v[j] + v[j + 1])) {  // also true for +inf + −inf: the helper is exact for every input
      out.v[j] = float_to_fp8_device<kE5m2>(v[j]);
      out.v[j + 1] = float_to_fp8_device<kE5m2>(v[j + 1]);
    } else {
      unsigned short pair;  // cvt puts its first source in the upper byte
      if constexpr (kE5m2) {
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(v[j + 1]), "f"(v[j]));
      } else {
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(v[j + 1]), "f"(v[j]));
      }
      out.v[j] = static_cast<uint8_t>(pair & 0xFF);
      out.v[j + 1] = static_cast<uint8_t>(pair >> 8);
    }
  }
  return out;
}

// x / s rounded to nearest, as the IEEE division, from r = RN(1/s) computed once: q0 = RN(x·r) is within an ulp
// of x/s and one exact FMA residual corrects it (Markstein's theorem), three instructions instead of a division
// per element. A non-finite q0 (x infinite or NaN, x·r overflowing, s tiny enough that r is infinite) takes the
// division itself, a zero q0 is returned as it is (its sign is the division's). Subnormal quotients may differ
// from the division in the last place; every fp8 format rounds them to 0 alike.
__device__ __forceinline__ float divide_by_scale(float x, float s, float r) {
  const float q0 = __fmul_rn(x, r);
  if (!isfinite(q0)) return __fdiv_rn(x, s);
  if (q0 == 0.0f) return q0;  // x = ±0 (the correction would turn −0 into +0) or an fp8-invisible underflow
  return __fmaf_rn(__fmaf_rn(-q0, s, x), r, q0);
}

template <bool kE5m2>
__device__ __forceinline__ float fp8_to_float_device(uint8_t bits) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(bits), kE5m2 ? __NV_E5M2 : __NV_E4M3);
  return __half2float(__half(h));
}

// Runs launch.template operator()<VEC, kE5m2>() with VEC = kVec (16-byte packs) when `packed`, else 1, and kE5m2 =
// e5m2: the four instantiations of a kernel that writes fp8 (or T) from T inputs.
template <int kVec, typename Launch>
void launch_packed_fp8(bool packed, bool e5m2, Launch&& launch) {
  if (packed && e5m2) launch.template operator()<kVec, true>();
  if (packed && !e5m2) launch.template operator()<kVec, false>();
  if (!packed && e5m2) launch.template operator()<1, true>();
  if (!packed && !e5m2) launch.template operator()<1, false>();
}

}  // namespace gpt::cuda
