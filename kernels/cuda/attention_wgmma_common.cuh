#pragma once
// Pieces the wgmma attention kernels share (forward v4/v5, backward v3): cp.async loads of [T, H, 128] rows into
// the 128-byte-swizzled tiles of kernels/cuda/wgmma.cuh, and the proxy fence that makes them visible to wgmma.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace gpt::cuda::attn {

// Bytes of one swizzled [rows × 128] bf16 tile: two slabs of rows · 128 bytes (head dim 128 = two 64-column slabs).
constexpr int swizzled_tile_bytes(int rows) { return 2 * rows * wgmma::kSlabRowBytes; }

// Starts copying rows [first, first + kRows) of one head ([T, H, 128] bf16) into a swizzled tile; rows at or past
// `end` are zero-filled (nothing is read for them).
template <int kThreads, int kRows>
__device__ __forceinline__ void load_swizzled_async(uint8_t* tile, const __nv_bfloat16* base, int first, int end,
                                                    int heads, int head) {
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  static_assert(kRows * kChunks % kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int j = 0; j < kRows * kChunks / kThreads; ++j) {
    const int i = threadIdx.x + j * kThreads;
    const int r = i / kChunks, chunk = i % kChunks;
    const int token = first + r;
    const bool valid = token < end;
    const __nv_bfloat16* src = base + ((static_cast<int64_t>(valid ? token : 0) * heads + head) * kHeadDim + chunk * 8);
    cp_async_16(tile + (chunk / 8) * (kRows * wgmma::kSlabRowBytes) + wgmma::swizzled_offset(r, chunk % 8), src,
                valid);
  }
}

// cp.async and st.shared write through the generic proxy; wgmma reads shared memory through the async proxy.
__device__ __forceinline__ void fence_async_proxy() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// The first 1024-byte boundary at or after `raw` (wgmma's swizzle is anchored there).
__device__ __forceinline__ uint8_t* align_1024(unsigned char* raw) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023});
}

}  // namespace gpt::cuda::attn
