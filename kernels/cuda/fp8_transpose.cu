// Byte transposes of fp8 matrices (kernels/cuda/fp8_variants.h): cuBLASLt's FP8 GEMMs read both operands
// K-contiguous, so fp8_gemm transposes an operand stored the other way (the §7.1 lm_head weight gradient X8ᵀ·G8
// transposes G8, one microbatch's 49,152 × 50,304 bytes). Both versions stage a tile in shared memory.
//   v1: 64 × 64-byte tiles moved as 4-byte words, the transposed words assembled from four byte loads of shared
//       memory; rows and cols multiples of 4. ≈ 2.4 TB/s on G8.
//   v2: 128 × 128-byte tiles moved as 16-byte chunks on both sides (full 128-byte lines of every row), the shared
//       tile XOR-swizzled by 16-byte chunk so that both phases are free of bank conflicts, and 4 × 4 byte blocks
//       transposed in registers with byte permutes (one 4-byte shared load per 4 bytes); rows and cols multiples
//       of 16 (every fp8_gemm operand: cuBLASLt's FP8 kernels need that too), else v1. ≈ 3.65 TB/s on G8
//       (1,355 µs against v1's 2,067 in the same run, 2026-12-04).
#include "kernels/cuda/fp8_variants.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/fp8.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kTileV1 = 64;
constexpr int kTileWordsV1 = kTileV1 / 4;

__global__ void transpose_bytes_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst, int64_t rows,
                                       int64_t cols) {
  __shared__ uint8_t tile[kTileV1][kTileV1 + 4];  // +4: rows 68 bytes apart spread the column reads over banks
  const int64_t r0 = blockIdx.y * int64_t{kTileV1}, c0 = blockIdx.x * int64_t{kTileV1};
  for (int i = threadIdx.x; i < kTileV1 * kTileWordsV1; i += kThreads) {
    const int r = i / kTileWordsV1, w = i % kTileWordsV1;
    const int64_t gr = r0 + r, gc = c0 + 4 * w;
    const uint32_t word = gr < rows && gc < cols ? *reinterpret_cast<const uint32_t*>(src + gr * cols + gc) : 0u;
    *reinterpret_cast<uint32_t*>(&tile[r][4 * w]) = word;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kTileV1 * kTileWordsV1; i += kThreads) {
    const int c = i / kTileWordsV1, w = i % kTileWordsV1;  // dst row c0 + c, dst columns r0 + 4w … r0 + 4w + 3
    const int64_t gc = c0 + c, gr = r0 + 4 * w;
    if (gc < cols && gr < rows) {
      const uint32_t word = uint32_t{tile[4 * w][c]} | uint32_t{tile[4 * w + 1][c]} << 8 |
                            uint32_t{tile[4 * w + 2][c]} << 16 | uint32_t{tile[4 * w + 3][c]} << 24;
      *reinterpret_cast<uint32_t*>(dst + gc * rows + gr) = word;
    }
  }
}

constexpr int kTileV2 = 128;                 // bytes per side
constexpr int kChunksPerRow = kTileV2 / 16;  // 16-byte chunks per tile row

// Chunk k of tile row r lives at chunk slot k ^ (r / 16 mod 8) of that row.
__device__ __forceinline__ int swizzled_chunk(int row, int chunk) { return chunk ^ ((row / 16) % kChunksPerRow); }

// Bytes n of the four words (rows) a, b, c, d as one word: the 4 × 4 byte transpose, two permutes per output pair.
struct ByteColumns {
  uint32_t col[4];
};
__device__ __forceinline__ ByteColumns transpose_4x4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  const uint32_t ab01 = __byte_perm(a, b, 0x5140), cd01 = __byte_perm(c, d, 0x5140);  // a0 b0 a1 b1 / c0 d0 c1 d1
  const uint32_t ab23 = __byte_perm(a, b, 0x7362), cd23 = __byte_perm(c, d, 0x7362);  // a2 b2 a3 b3 / c2 d2 c3 d3
  return {{__byte_perm(ab01, cd01, 0x5410), __byte_perm(ab01, cd01, 0x7632), __byte_perm(ab23, cd23, 0x5410),
           __byte_perm(ab23, cd23, 0x7632)}};
}

__global__ void __launch_bounds__(kThreads)
    transpose_bytes_v2_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst, int64_t rows, int64_t cols) {
  __shared__ uint4 tile[kTileV2 * kChunksPerRow];
  const int64_t r0 = blockIdx.y * int64_t{kTileV2}, c0 = blockIdx.x * int64_t{kTileV2};
  // Phase 1: each warp reads four full 128-byte tile rows.
#pragma unroll
  for (int i = 0; i < kTileV2 * kChunksPerRow / kThreads; ++i) {
    const int index = i * kThreads + threadIdx.x, r = index / kChunksPerRow, k = index % kChunksPerRow;
    const int64_t gr = r0 + r, gc = c0 + 16 * k;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (gr < rows && gc < cols) v = *reinterpret_cast<const uint4*>(src + gr * cols + gc);
    tile[r * kChunksPerRow + swizzled_chunk(r, k)] = v;
  }
  __syncthreads();
  // Phase 2: thread (group g of 16 tile rows, word column w of 4 tile columns) writes the 16 bytes of rows
  // 16g … 16g + 15 in each of its 4 columns: dst rows c0 + 4w + n, dst columns r0 + 16g …; lanes 0-7 of a warp
  // cover one dst row's 128 bytes.
  const int g = threadIdx.x % 8, w = threadIdx.x / 8;
  const auto* words = reinterpret_cast<const uint32_t*>(tile);
  uint32_t out[4][4];  // [dst row n][16-row block b]
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    uint32_t in[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = 16 * g + 4 * b + j;
      in[j] = words[(r * kChunksPerRow + swizzled_chunk(r, w / 4)) * 4 + w % 4];
    }
    const ByteColumns t = transpose_4x4(in[0], in[1], in[2], in[3]);
#pragma unroll
    for (int n = 0; n < 4; ++n) out[n][b] = t.col[n];
  }
  const int64_t gr = r0 + 16 * g;
#pragma unroll
  for (int n = 0; n < 4; ++n) {
    const int64_t gc = c0 + 4 * w + n;
    if (gc < cols && gr < rows) {
      *reinterpret_cast<uint4*>(dst + gc * rows + gr) = make_uint4(out[n][0], out[n][1], out[n][2], out[n][3]);
    }
  }
}

}  // namespace

Tensor transpose_fp8_bytes(const Tensor& q, int version) {
  GPT_CHECK(q.ndim() == 2 && is_fp8(q.dtype()) && q.device() == Device::cuda,
            "transpose_fp8_bytes: expected a 2-D fp8 CUDA tensor, got ", q.describe());
  const int64_t rows = q.size(0), cols = q.size(1);
  GPT_CHECK(rows % 4 == 0 && cols % 4 == 0, "transpose_fp8_bytes: rows and cols must be multiples of 4, got ",
            q.describe());
  Tensor t = Tensor::empty({cols, rows}, q.dtype(), Device::cuda);
  if (q.numel() == 0) return t;
  const auto* src = static_cast<const uint8_t*>(q.raw());
  auto* dst = static_cast<uint8_t*>(const_cast<void*>(t.raw()));
  const bool v2 = version == 2 && rows % 16 == 0 && cols % 16 == 0 && aligned16(src) && aligned16(dst);
  const int tile = v2 ? kTileV2 : kTileV1;
  GPT_CHECK((rows + tile - 1) / tile < 65536, "transpose_fp8_bytes: ", rows, " rows exceed the transpose grid");
  const dim3 grid(static_cast<unsigned>((cols + tile - 1) / tile), static_cast<unsigned>((rows + tile - 1) / tile));
  if (v2) {
    transpose_bytes_v2_kernel<<<grid, kThreads>>>(src, dst, rows, cols);
  } else {
    transpose_bytes_kernel<<<grid, kThreads>>>(src, dst, rows, cols);
  }
  GPT_CUDA_CHECK_LAUNCH();
  return t;
}

}  // namespace gpt::cuda
