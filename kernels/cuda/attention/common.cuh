#pragma once
// Shared pieces of the CUDA attention kernels (kernels/attention.h): bf16 tensor-core fragments (mma.sync
// m16n8k16, fp32 accumulation) and shared-memory tile loads; the per-token key range is in attention/schedule.h.
//
// Fragment layouts of mma.m16n8k16.row.col (g = lane / 4, c = lane % 4):
//   A (16×16, row-major): a0 = (g, 2c..2c+1), a1 = (g+8, 2c..), a2 = (g, 2c+8..), a3 = (g+8, 2c+8..)
//   B (16×8, k-major per column n): b0 = (k = 2c..2c+1, n = g), b1 = (k = 2c+8.., n = g)
//   C (16×8, fp32): c0, c1 = (g, 2c..2c+1), c2, c3 = (g+8, 2c..2c+1)
// Two adjacent C tiles (16 columns) hold exactly an A fragment of those 16 columns, which is how P or dS feed the
// next product without a trip through shared memory.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/attention/schedule.h"
#include "kernels/cuda/fast_math.cuh"

namespace gpt::cuda::attn {

inline constexpr int kHeadDim = 128;
inline constexpr int kRowStride = kHeadDim + 8;  // bf16 elements; +16 bytes makes fragment loads conflict-free

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8×8 b16 matrices, each transposed on the way: with rows = k and columns = n in shared memory this yields
// B fragments (k-major) of two n-tiles. `row_ptr` is this lane's row address (16-byte aligned).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* row_ptr) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(row_ptr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ uint32_t load_pair(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// A fragment of rows [row0, row0+16) and columns [col0, col0+16) of a row-major shared tile.
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const __nv_bfloat16* tile, int row0, int col0, int lane) {
  const int g = lane >> 2, c = lane & 3;
  const __nv_bfloat16* p = tile + (row0 + g) * kRowStride + col0 + 2 * c;
  a[0] = load_pair(p);
  a[1] = load_pair(p + 8 * kRowStride);
  a[2] = load_pair(p + 8);
  a[3] = load_pair(p + 8 * kRowStride + 8);
}

// B fragment where B[k][n] = tile[n0 + n][k0 + k] (the tile's rows are the product's columns: K for Q·Kᵀ).
__device__ __forceinline__ void load_b_rows(uint32_t& b0, uint32_t& b1, const __nv_bfloat16* tile, int n0, int k0,
                                            int lane) {
  const int g = lane >> 2, c = lane & 3;
  const __nv_bfloat16* p = tile + (n0 + g) * kRowStride + k0 + 2 * c;
  b0 = load_pair(p);
  b1 = load_pair(p + 8);
}

// B fragments of two n-tiles where B[k][n] = tile[k0 + k][n0 + n] (rows are the reduction: V for P·V).
__device__ __forceinline__ void load_b_cols_x2(uint32_t (&b)[4], const __nv_bfloat16* tile, int k0, int n0, int lane) {
  const int matrix = lane >> 3, row = lane & 7;
  ldmatrix_x4_trans(b, tile + (k0 + row + (matrix & 1) * 8) * kRowStride + n0 + (matrix >> 1) * 8);
}

// Copies `rows` rows of one head ([T, H, 128] bf16, starting at token `first`) into a padded shared tile;
// rows past `last_valid` (exclusive) are zero-filled so that no garbage (or NaN) reaches the tensor cores.
template <int kThreads>
__device__ __forceinline__ void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* base, int64_t first, int rows,
                                          int64_t last_valid, int heads, int head) {
  constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  for (int i = threadIdx.x; i < rows * kChunks; i += kThreads) {
    const int r = i / kChunks, chunk = i % kChunks;
    const int64_t token = first + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (token >= 0 && token < last_valid) {
      v = *reinterpret_cast<const uint4*>(base + (token * heads + head) * kHeadDim + chunk * 8);
    }
    *reinterpret_cast<uint4*>(tile + r * kRowStride + chunk * 8) = v;
  }
}

// ---- Pieces of the pipelined kernels (v2) ----------------------------------------------------------------

// 16-byte asynchronous global→shared copy; with `valid` false the 16 bytes are zero-filled (src-size 0) and
// nothing is read, so rows past the end of the range never reach the tensor cores as garbage.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Starts copying rows [first, first + kRows) of one head ([T, H, 128] bf16) into shared memory, 16 bytes at a time;
// `destination(r, chunk)` is where chunk `chunk` (of 16) of row r lands, so each tile layout supplies only its
// addressing. Rows at or past `end` are zero-filled (nothing is read for them). Completion: cp_async_commit +
// cp_async_wait + a barrier.
template <int kThreads, int kRows, class Destination>
__device__ __forceinline__ void load_rows_async(Destination destination, const __nv_bfloat16* base, int first, int end,
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
    cp_async_16(destination(r, chunk), src, valid);
  }
}

// load_rows_async into a padded row-major tile (kRowStride elements a row).
template <int kThreads, int kRows>
__device__ __forceinline__ void load_tile_async(__nv_bfloat16* tile, const __nv_bfloat16* base, int first, int end,
                                                int heads, int head) {
  load_rows_async<kThreads, kRows>([tile](int r, int chunk) { return tile + r * kRowStride + chunk * 8; }, base, first,
                                   end, heads, head);
}

// Four 8×8 b16 matrices, not transposed.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* row_ptr) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(row_ptr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// A fragment (rows [row0, row0+16), columns [col0, col0+16) of a row-major padded tile) in one ldmatrix.
__device__ __forceinline__ void ldmatrix_a(uint32_t (&a)[4], const __nv_bfloat16* tile, int row0, int col0, int lane) {
  const int matrix = lane >> 3, row = lane & 7;
  ldmatrix_x4(a, tile + (row0 + row + (matrix & 1) * 8) * kRowStride + col0 + (matrix >> 1) * 8);
}

// B fragments of two n-tiles where B[k][n] = tile[n0 + n][k0 + k] (rows are the product's columns), in one
// ldmatrix: b[0], b[1] for columns n0..n0+7, b[2], b[3] for n0+8..n0+15.
__device__ __forceinline__ void ldmatrix_b_rows_x2(uint32_t (&b)[4], const __nv_bfloat16* tile, int n0, int k0,
                                                   int lane) {
  const int matrix = lane >> 3, row = lane & 7;
  ldmatrix_x4(b, tile + (n0 + row + (matrix >> 1) * 8) * kRowStride + k0 + (matrix & 1) * 8);
}

}  // namespace gpt::cuda::attn
