#pragma once
// Hopper's tensor copy engine (TMA) and the shared-memory barriers its copies complete on (sm_90): mbarrier
// arrive/wait with phase parity, bulk tensor loads that count their bytes on an mbarrier, and named barriers for a
// subset of a block's warps. The descriptors come from kernels/cuda/tensor_map.h.
//
// Phases: an mbarrier initialised with count n completes a phase when n arrivals have come and every byte announced
// by arrive_expect_tx has landed; the k-th use of a barrier (k = 0, 1, …) is waited with parity k % 2.
#include <cuda.h>

#include <cstdint>

namespace gpt::cuda::tma {

__device__ __forceinline__ uint32_t shared_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_addr(bar)), "r"(arrivals) : "memory");
}
// Makes initialised barriers visible to the copy engine; a block barrier must follow before any thread uses them.
__device__ __forceinline__ void fence_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

__device__ __forceinline__ void arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_addr(bar)) : "memory");
}
// One arrival that also announces `bytes` the copies of this phase will deliver.
__device__ __forceinline__ void arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_addr(bar)), "r"(bytes)
               : "memory");
}

// Announces `bytes` for the current phase without arriving (the arrivals come separately).
__device__ __forceinline__ void expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(shared_addr(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = shared_addr(bar);
  uint32_t done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(addr), "r"(parity)
                 : "memory");
  }
}

// Copies the box at coordinates (c0, c1, c2) of a 3-D tensor map into shared memory at `dst`; the bytes count on
// `bar`. Coordinates past the tensor's end read as zeros.
__device__ __forceinline__ void load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(shared_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(shared_addr(bar))
      : "memory");
}

// Both 64-column boxes of a [rows × 128] tile of one head (the head_rows maps of kernels/cuda/tensor_map.h), the
// second slab `slab_bytes` after the first.
__device__ __forceinline__ void load_head_rows(void* tile, uint32_t slab_bytes, const CUtensorMap* map, int head,
                                               int row, uint64_t* bar) {
  load_3d(tile, map, 0, head, row, bar);
  load_3d(static_cast<uint8_t*>(tile) + slab_bytes, map, 64, head, row, bar);
}

// Shared → global through the copy engine (bulk groups of the issuing thread): the box at (c0, c1, c2) is written
// from `src`, or `src` is added into it element by element (in the map's element type, f32 or bf16, at L2); rows
// past the tensor's end are not written. A bulk group is committed, then waited for until its shared reads are done
// (the source may be reused) or until its global writes are complete.
__device__ __forceinline__ void store_3d(const CUtensorMap* map, int c0, int c1, int c2, const void* src) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(shared_addr(src))
               : "memory");
}
__device__ __forceinline__ void reduce_add_3d(const CUtensorMap* map, int c0, int c1, int c2, const void* src) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(c0), "r"(c1), "r"(c2), "r"(shared_addr(src))
      : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_shared_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_complete() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Orders this thread's global accesses of the generic proxy (loads, stores, flags) against those of the copy engine.
__device__ __forceinline__ void fence_proxy_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

// Named barriers (ids 1…15; 0 is __syncthreads): `threads` counts every thread that syncs or arrives.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace gpt::cuda::tma
