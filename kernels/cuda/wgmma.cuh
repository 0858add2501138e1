#pragma once
// Hopper warpgroup MMA (wgmma, sm_90a) for the attention kernels: shared-memory matrix descriptors of
// 128-byte-swizzled bf16 tiles and the m64nNk16 instructions with fp32 accumulators.
//
// Tile layout ("128B swizzle"): a tile is stored as slabs of 64 bf16 columns; in a slab every row is 128 bytes and
// the 16-byte chunk c of row r sits at chunk c ^ (r % 8). Slabs start at 1024-byte boundaries.
//   K-major operand (the reduction runs along the rows' 128 bytes: Q and K in Q·Kᵀ): 8-row groups 1024 bytes apart
//   (stride byte offset); k-step j (16 elements) starts 32·(j % 4) bytes into slab j / 4.
//   MN-major operand (the rows are the reduction: V in P·V, transposed on the fly): 8-row groups along K 1024 bytes
//   apart (stride byte offset), 64-column slabs along N `slab_bytes` apart (leading byte offset).
// Accumulators of m64nN for thread t of the warpgroup (warp w = t / 32, g = lane / 4, c = lane % 4):
//   d[4j + 0..1] = (row 16w + g, columns 8j + 2c, 8j + 2c + 1), d[4j + 2..3] = (row 16w + g + 8, same columns),
// per warp exactly mma.sync m16n8's C fragments (attention/common.cuh), so two adjacent 8-column blocks of P are the
// A fragment of a 16-deep k-step of the next product, in registers.
// Ordering: fence() before the first wgmma that reads registers written since; commit() then wait<N>() before any
// thread touches the accumulators; fence_operands() keeps the compiler from moving accumulator reads above wait.
#include <cstdint>

namespace gpt::cuda::wgmma {

inline constexpr int kSlabCols = 64;  // bf16 columns per 128-byte swizzled row
inline constexpr int kSlabRowBytes = 128;

// Byte offset of 16-byte chunk `chunk` (0…7) of row `row` inside a swizzled slab.
__device__ __forceinline__ uint32_t swizzled_offset(int row, int chunk) {
  return static_cast<uint32_t>(row * kSlabRowBytes + ((chunk ^ (row & 7)) << 4));
}

// Descriptor of a 128B-swizzled operand starting at shared byte address `addr`.
__device__ __forceinline__ uint64_t descriptor(uint32_t addr, uint32_t leading_bytes, uint32_t stride_bytes) {
  return (static_cast<uint64_t>(addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32) | (uint64_t{1} << 62);
}
// K-major: the leading byte offset is unused with the 128-byte swizzle (1 by convention).
__device__ __forceinline__ uint64_t k_major(uint32_t addr) { return descriptor(addr, 16, 1024); }
__device__ __forceinline__ uint64_t mn_major(uint32_t addr, uint32_t slab_bytes) {
  return descriptor(addr, slab_bytes, 1024);
}

// The descriptor of the operand `bytes` (a multiple of 16) after the one `desc` describes: an add to the start
// address field (bits 0–13, address / 16) alone. Shared addresses stay below 2^18, so the add cannot carry into the
// leading byte offset; the upper word (stride, swizzle) is the same, so stepping through an operand's k-steps costs
// one integer add per descriptor instead of rebuilding it (which ptxas repeats per wgmma).
__device__ __forceinline__ uint64_t advance(uint64_t desc, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4), hi = static_cast<uint32_t>(desc >> 32);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64×64] (+)= A·B with A [64×16] and B [16×64] both from shared memory, both K-major.
__device__ __forceinline__ void mma_m64n64k16_ss(float (&d)[32], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, "
      "%2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, "
      "%28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(accumulate));
}

// D[64×64] (+)= A·B with A [64×16] and B [16×64] both from shared memory, both MN-major (imm-trans-a = imm-trans-b
// = 1): A is stored as its transpose (rows = the reduction), B as for mma_m64n128k16_rs_mn.
__device__ __forceinline__ void mma_m64n64k16_ss_mn(float (&d)[32], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, "
      "%2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, "
      "%28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(accumulate));
}

// D[64×128] (+)= A·B with A [64×16] in registers (the accumulator layout's A fragments) and B [16×128] from
// shared memory, MN-major (transposed on the fly: imm-trans-b = 1).
__device__ __forceinline__ void mma_m64n128k16_rs_mn(float (&d)[64], const uint32_t (&a)[4], uint64_t b,
                                                     int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, "
      "%4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, "
      "%33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "
      "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, "
      "%61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

// D[64×64] (+)= A·B with A [64×16] in registers and B [16×64] from shared memory, K-major (imm-trans-b = 0).
__device__ __forceinline__ void mma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, "
      "%4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, "
      "%33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

}  // namespace gpt::cuda::wgmma
