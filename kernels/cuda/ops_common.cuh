#pragma once
// Shared device helpers of the memory-bound op kernels: 16-byte packs, stream-ordered scratch, block reductions,
// the bf16 rounding of fp32 scalars (RECIPE §0.4) and FP8 conversions that match kernels/fp8.h bit for bit.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/type_traits.cuh"

namespace gpt::cuda {

// VEC consecutive elements moved as one access (16 bytes when VEC = 16 / sizeof(T)).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

template <typename T>
inline constexpr int kVec16 = static_cast<int>(16 / sizeof(T));

template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, VEC>*>(p);
}
template <typename T, int VEC>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, VEC>& v) {
  *reinterpret_cast<Pack<T, VEC>*>(p) = v;
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Stream-ordered device scratch (default stream): cheap after the pool warms up, no device synchronisation.
class DeviceScratch {
 public:
  explicit DeviceScratch(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) ptr_ = stream_ordered_alloc(bytes_, cudaStream_t{});
  }
  ~DeviceScratch() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, 0);
  }
  DeviceScratch(DeviceScratch&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(other.bytes_) {}
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  DeviceScratch& operator=(DeviceScratch&&) = delete;
  template <typename U>
  U* as() const {
    return static_cast<U*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Sum over the block (blockDim.x a multiple of 32, at most 1024); the result is valid in every thread. The
// combination order is fixed by the thread layout, so repeated calls give identical results.
template <typename A>
__device__ __forceinline__ A block_sum(A v, A* shared32) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // shared32 may still be read by a previous call
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  A total = 0;
  for (int w = 0; w < warps; ++w) total += shared32[w];
  return total;
}

// The scalar an fp32 parameter becomes when it multiplies a tensor of storage type T (kernels/cpu/scalars.h).
template <typename T>
__device__ __forceinline__ double scalar_for(double v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return static_cast<double>(__bfloat162float(__float2bfloat16_rn(static_cast<float>(v))));
  } else if constexpr (std::is_same_v<T, float>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return v;
  }
}

__device__ __forceinline__ double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

// float -> e4m3 / e5m2: round to nearest even, saturating (infinities too), NaN -> sign | 0x7F (kernels/fp8.h).
template <bool kE5m2>
__device__ __forceinline__ uint8_t float_to_fp8_device(float v) {
  const uint8_t sign = signbit(v) ? 0x80 : 0x00;
  if (isnan(v)) return static_cast<uint8_t>(sign | 0x7F);
  const float max_finite = kE5m2 ? 57344.0f : 448.0f;
  if (isinf(v)) v = copysignf(max_finite, v);
  return static_cast<uint8_t>(
      __nv_cvt_float_to_fp8(v, __NV_SATFINITE, kE5m2 ? __NV_E5M2 : __NV_E4M3));
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

inline unsigned blocks_for(int64_t work, int per_block, int64_t cap = 65535LL * 64) {
  int64_t b = (work + per_block - 1) / per_block;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b < cap ? b : cap);
}

}  // namespace gpt::cuda
