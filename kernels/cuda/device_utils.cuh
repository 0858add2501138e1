#pragma once
// Device utilities of the memory-bound CUDA ops (elementwise, per-row, optimizer steps): the stream they launch on,
// grid sizing, 16-byte packs, stream-ordered scratch, round-to-nearest scalar arithmetic, and the warp / block
// reductions every per-row kernel shares. Each reduction has one fixed combination order: results are identical
// from run to run, and a kernel that changes the order must name a new function rather than edit one of these.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/type_traits.cuh"

namespace gpt::cuda {

// ---- streams and grids ----

// The stream ops launch on: the thread's current stream (runtime.h; the legacy default stream unless a StreamGuard
// says otherwise).
inline cudaStream_t op_stream() { return current_stream(); }

// The legacy default stream, named for the ops that still launch with `<<<grid, block>>>` (no stream): their
// scratch is allocated and freed there too, so it stays ordered with their kernels under any StreamGuard.
inline constexpr cudaStream_t kLegacyDefaultStream = nullptr;

// Blocks for a grid-stride loop over `work` items: enough to fill the chip, no more than the work needs.
inline unsigned grid_stride_blocks(int64_t work, int threads, int blocks_per_sm = 8) {
  const int64_t needed = (work + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(multiprocessor_count()) * blocks_per_sm;
  return static_cast<unsigned>(needed < 1 ? 1 : (needed < cap ? needed : cap));
}

// Blocks of `per_block` items each for `work` items (at least one), capped for kernels that loop over the rest.
inline unsigned blocks_for(int64_t work, int per_block, int64_t cap = 65535LL * 64) {
  int64_t b = (work + per_block - 1) / per_block;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b < cap ? b : cap);
}

inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
inline bool aligned16(const void* p) { return aligned_to(p, 16); }

// ---- packed (vector) access ----

// VEC consecutive elements moved as one access (16 bytes when VEC = kVec16<T>, e.g. 4 floats or 8 bf16).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

template <typename T>
inline constexpr int kVec16 = static_cast<int>(16 / sizeof(T));

// The pack that starts at element p (p aligned to sizeof(Pack<T, VEC>)).
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, VEC>*>(p);
}
template <typename T, int VEC>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, VEC>& v) {
  *reinterpret_cast<Pack<T, VEC>*>(p) = v;
}

// ---- scratch ----

// Device scratch allocated and freed in stream order on one stream (pooled by the driver: cheap after the pool
// warms up, no device synchronisation). The stream is the one the kernels using the scratch launch on.
class DeviceScratch {
 public:
  explicit DeviceScratch(size_t bytes, cudaStream_t stream = op_stream()) : bytes_(bytes), stream_(stream) {
    if (bytes_ > 0) ptr_ = stream_ordered_alloc(bytes_, stream_);
  }
  ~DeviceScratch() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);
  }
  DeviceScratch(DeviceScratch&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(other.bytes_), stream_(other.stream_) {}
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
  cudaStream_t stream_ = nullptr;
};

// ---- scalar arithmetic ----

// Correctly rounded single operations, never contracted into FMAs: the optimizer kernels reproduce the CPU
// reference's rounding sequence exactly (the CPU build does not contract either).
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div_rn(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double sqrt_rn(double a) { return __dsqrt_rn(a); }

// Rounds to the storage type T and back (the W(·) / round() of the op headers; identity for float, double).
template <typename T, typename A>
__device__ __forceinline__ A round_to(A v) {
  return to_acc<A>(from_acc<T>(v));
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

// ---- reductions ----
// Butterfly (xor) shuffles, the widest offset first: every lane of the group ends with the same total.

// Sum over the aligned group of `group` lanes (a power of two up to 32) that holds this lane; every lane of the
// warp must call it.
template <typename A>
__device__ __forceinline__ A group_sum(A v, int group) {
  for (int offset = group / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
  return group_sum(v, 32);
}

template <typename A>
__device__ __forceinline__ A warp_max(A v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The four lanes that hold one row of an MMA fragment (lanes 4r .. 4r + 3), the narrowest offset first: 1, then
// 2. group_sum(v, 4) runs 2, then 1, which rounds differently; the attention kernels' results depend on this order.
template <typename A>
__device__ __forceinline__ A quad_sum(A v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
  return v;
}

// Σ row[i]² over i < n for the warp that owns the row: lane l adds rows[l], rows[l + 32], ... in order, then
// warp_sum. Every lane gets the total.
template <typename A, typename T, typename Index>
__device__ __forceinline__ A warp_row_sum_squares(const T* row, Index n, int lane) {
  A ss = 0;
  for (Index i = lane; i < n; i += 32) {
    const A v = to_acc<A>(row[i]);
    ss += v * v;
  }
  return warp_sum(ss);
}

// 1/sqrt(mean(x²) + eps) of a row of n elements from its warp_row_sum_squares (rmsnorm's rstd): every kernel that
// normalises a row forms it here, so that fused and unfused norms give the same bits.
template <typename A>
__device__ __forceinline__ A rms_inverse(A sum_squares, int n, float eps) {
  return A(1) / sqrt(sum_squares / A(n) + A(eps));
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024): warp_sum in each warp, then the warp totals in
// warp order. Every thread gets the result. `shared32` holds 32 values; a following call synchronizes before
// reusing it.
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

}  // namespace gpt::cuda
