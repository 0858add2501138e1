#pragma once
// Pieces the wgmma attention kernels share (forward v4–v8, backward v3–v5): cp.async loads of [T, H, 128] rows into
// the 128-byte-swizzled tiles of kernels/cuda/wgmma.cuh, the proxy fence that makes them visible to wgmma, the
// products over 64 × 64 score tiles (S = A·Bᵀ, then X·B with X in registers), the backward's gradient stores and
// the register rebalancing of warp-specialised blocks.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace gpt::cuda::attn {

// Bytes of one swizzled [rows × 128] bf16 tile: two slabs of rows · 128 bytes (head dim 128 = two 64-column slabs).
constexpr int swizzled_tile_bytes(int rows) { return 2 * rows * wgmma::kSlabRowBytes; }

// load_rows_async (attention/common.cuh) into a swizzled tile: chunks 0–7 of a row in the first 64-column slab,
// 8–15 in the second.
template <int kThreads, int kRows>
__device__ __forceinline__ void load_swizzled_async(uint8_t* tile, const __nv_bfloat16* base, int first, int end,
                                                    int heads, int head) {
  load_rows_async<kThreads, kRows>(
      [tile](int r, int chunk) {
        return tile + (chunk / 8) * (kRows * wgmma::kSlabRowBytes) + wgmma::swizzled_offset(r, chunk % 8);
      },
      base, first, end, heads, head);
}

// cp.async and st.shared write through the generic proxy; wgmma reads shared memory through the async proxy.
__device__ __forceinline__ void fence_async_proxy() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// 64 × 64 accumulators of m64n64 (per thread) and 64 × 128 of m64n128; query/key tiles of the backward are 64 rows.
inline constexpr int kScoreAcc = 32, kRowAcc = kHeadDim / 2, kScoreTile = 64;

// This thread's two accumulator rows of its warpgroup's 64 (g and g + 8 of its warp's 16).
__device__ __forceinline__ int warpgroup_row(int i) {
  return ((threadIdx.x % 128) / 32) * 16 + ((threadIdx.x % 32) >> 2) + 8 * i;
}

// X (64 × 64) = A·Bᵀ over the head dim, both operands 64 rows of swizzled [rows × 128] tiles whose two 64-column
// slabs lie `a_slab` / `b_slab` bytes apart (one commit group; not waited).
__device__ __forceinline__ void issue_product(float (&x)[kScoreAcc], uint32_t a_addr, uint32_t a_slab, uint32_t b_addr,
                                              uint32_t b_slab) {
  const uint64_t a_desc = wgmma::k_major(a_addr), b_desc = wgmma::k_major(b_addr);
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    const uint32_t within = 32 * (kk % 4);
    wgmma::mma_m64n64k16_ss(x, wgmma::advance(a_desc, (kk / 4) * a_slab + within),
                            wgmma::advance(b_desc, (kk / 4) * b_slab + within), kk > 0);
  }
}

// acc (64 × 128) += X·B with X as register A fragments (k-step kk = columns 16kk … 16kk + 15 of X) and B a swizzled
// [64 × 128] tile read MN-major.
__device__ __forceinline__ void issue_accumulate(float (&acc)[kRowAcc], const uint32_t (&xa)[kScoreTile / 16][4],
                                                 uint32_t b_addr) {
  constexpr uint32_t kSlab = kScoreTile * wgmma::kSlabRowBytes;
  const uint64_t b_desc = wgmma::mn_major(b_addr, kSlab);
#pragma unroll
  for (int kk = 0; kk < kScoreTile / 16; ++kk) {
    wgmma::mma_m64n128k16_rs_mn(acc, xa[kk], wgmma::advance(b_desc, kk * 16 * wgmma::kSlabRowBytes), 1);
  }
}

// A fragments of a 64 × 64 accumulator tile (x[4·nt + j]: 8-column block nt, element j).
__device__ __forceinline__ void pack_fragments(const float (&x)[kScoreAcc], uint32_t (&xa)[kScoreTile / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kScoreTile / 16; ++kk) {
    xa[kk][0] = pack_bf16(x[8 * kk], x[8 * kk + 1]);
    xa[kk][1] = pack_bf16(x[8 * kk + 2], x[8 * kk + 3]);
    xa[kk][2] = pack_bf16(x[8 * kk + 4], x[8 * kk + 5]);
    xa[kk][3] = pack_bf16(x[8 * kk + 6], x[8 * kk + 7]);
  }
}

// One gradient's part of a block epilogue: dst[t, h, :] += scale · acc for this thread's two accumulator rows
// (tokens row0 + warpgroup_row(i)), rounded once.
struct GradientRows {
  __nv_bfloat16* dst;
  const float (&acc)[kRowAcc];
  int row0;
  float scale;
};

// The epilogue of kGradients gradients at once: every old value is loaded before the first store, so the whole
// read-modify-write costs one memory latency instead of one per row and gradient (the compiler may not move loads
// of one row above stores of another: they could alias).
template <int kGradients>
__device__ __forceinline__ void add_accumulator_rows(const GradientRows (&grads)[kGradients], int tokens, int heads,
                                                     int head) {
  constexpr int kCells = kHeadDim / 8;  // bf16 pairs per row and thread
  const int c = threadIdx.x & 3;
  __nv_bfloat162 old[kGradients][2][kCells];
#pragma unroll
  for (int g = 0; g < kGradients; ++g) {
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      const int t = grads[g].row0 + warpgroup_row(row);
      const __nv_bfloat16* p = grads[g].dst + (static_cast<int64_t>(t < tokens ? t : 0) * heads + head) * kHeadDim;
#pragma unroll
      for (int nt = 0; nt < kCells; ++nt) {
        old[g][row][nt] = *reinterpret_cast<const __nv_bfloat162*>(p + nt * 8 + 2 * c);
      }
    }
  }
#pragma unroll
  for (int g = 0; g < kGradients; ++g) {
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      const int t = grads[g].row0 + warpgroup_row(row);
      if (t >= tokens) continue;
      __nv_bfloat16* p = grads[g].dst + (static_cast<int64_t>(t) * heads + head) * kHeadDim;
#pragma unroll
      for (int nt = 0; nt < kCells; ++nt) {
        const float2 o = __bfloat1622float2(old[g][row][nt]);
        const float scale = grads[g].scale;
        *reinterpret_cast<__nv_bfloat162*>(p + nt * 8 + 2 * c) = __floats2bfloat162_rn(
            o.x + scale * grads[g].acc[4 * nt + 2 * row], o.y + scale * grads[g].acc[4 * nt + 2 * row + 1]);
      }
    }
  }
}

// Warp-specialised blocks move registers between warpgroups (every warp of a warpgroup executes the same one):
// producers lower their limit, consumers raise theirs; the kernel's total must fit the register file.
template <int kRegisters>
__device__ __forceinline__ void raise_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void lower_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// The first 1024-byte boundary at or after `raw` (wgmma's swizzle is anchored there).
// Pointer arithmetic, not an integer round trip: the result must stay visibly derived from the shared array so
// that the compiler emits shared-memory loads and stores (ld.shared / st.shared) rather than generic ones.
__device__ __forceinline__ uint8_t* align_1024(unsigned char* raw) {
  return raw + ((1024 - (reinterpret_cast<uintptr_t>(raw) & 1023)) & 1023);
}

}  // namespace gpt::cuda::attn
