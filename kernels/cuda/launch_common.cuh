#pragma once
// Launch helpers shared by the elementwise and per-row CUDA kernels: the stream ops launch on, grid sizing,
// packed (vector) loads, round-to-nearest arithmetic that the compiler may not fuse, and stream-ordered scratch.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/type_traits.cuh"

namespace gpt::cuda {

// Every op of this file family launches on the thread's current stream (runtime.h; the legacy default stream
// unless a StreamGuard says otherwise).
inline cudaStream_t op_stream() { return current_stream(); }

// Blocks for a grid-stride loop over `work` items: enough to fill the chip, no more than the work needs.
inline unsigned grid_stride_blocks(int64_t work, int threads, int blocks_per_sm = 8) {
  const int64_t needed = (work + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(multiprocessor_count()) * blocks_per_sm;
  return static_cast<unsigned>(needed < 1 ? 1 : (needed < cap ? needed : cap));
}

inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// N consecutive elements moved as one access (16 bytes for 4 floats, 8 for 4 bf16).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};
template <int N, typename T>
__device__ __forceinline__ Pack<T, N> load_pack(const T* base, int64_t pack_index) {
  return reinterpret_cast<const Pack<T, N>*>(base)[pack_index];
}
template <int N, typename T>
__device__ __forceinline__ void store_pack(T* base, int64_t pack_index, const Pack<T, N>& p) {
  reinterpret_cast<Pack<T, N>*>(base)[pack_index] = p;
}

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

// Sum over a block whose size is a multiple of 32 (at most 1024 threads), in a fixed order (deterministic).
// Every thread gets the result. `scratch` holds 32 values; the call ends with the block synchronized.
template <typename A>
__device__ A block_sum(A v, A* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  A total = 0;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

// Device scratch memory allocated and freed in stream order (pooled by the driver: cheap, no device sync).
class DeviceScratch {
 public:
  explicit DeviceScratch(size_t bytes) {
    if (bytes > 0) ptr_ = stream_ordered_alloc(bytes, op_stream());
  }
  ~DeviceScratch() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, op_stream());
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

}  // namespace gpt::cuda
