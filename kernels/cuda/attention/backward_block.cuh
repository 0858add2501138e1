#pragma once
// The block of the fused CUDA attention backward (attention/backward.cuh, which has the consumers, the kernel and its
// launch): constants, shared-memory layout, arguments, the producer warps (query-tile loads, ordered dQ adds) and
// the consumers' dQ and epilogue pieces.
#include <cuda.h>
#include <cuda_bf16.h>

#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/attention/wgmma_common.cuh"
#include "kernels/cuda/tma.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace gpt::cuda::attn::fused_backward {

constexpr int kConsumers = 2, kKeys = 64 * kConsumers, kQueries = kScoreTile, kStages = 2;
constexpr int kConsumerThreads = 128 * kConsumers, kConsumerWarps = 4 * kConsumers;
constexpr int kThreads = kConsumerThreads + 128;  // + the producer warpgroup (three warps work: loads, dQ ×2)
constexpr int kConsumerRegisters = 240, kProducerRegisters = 24;
static_assert(kConsumerThreads * kConsumerRegisters + 128 * kProducerRegisters <= 65536, "register file");

constexpr int kKeySlab = kKeys * wgmma::kSlabRowBytes, kKeyTile = 2 * kKeySlab;           // K or V: 16 / 32 KB
constexpr int kQuerySlab = kQueries * wgmma::kSlabRowBytes, kQueryTile = 2 * kQuerySlab;  // Q or dY: 8 / 16 KB
constexpr int kDsTile = kKeys * wgmma::kSlabRowBytes;  // dSᵀ: 128 key rows × 64 query columns, one slab, 16 KB
constexpr int kDqBoxCols = 32, kDqBoxes = kHeadDim / kDqBoxCols;     // f32 staging: 4 boxes of [64 × 32], 128 B rows
constexpr int kDqBox = kQueries * 128, kDqTile = kDqBoxes * kDqBox;  // 8 / 32 KB
constexpr int kDqStages = 2;  // staging tiles, each with its own adder warp: contribution k uses tile k % 2
constexpr uint32_t kStageTransferBytes = 2 * kQueryTile;  // a Q tile and a dY tile
// Named barriers of the two consumer warpgroups (one dSᵀ tile): dSᵀ may be overwritten (both finished the last dQ
// product) / dSᵀ holds both halves; and (async_epilogue) both finished their last tile (the epilogue reuses the Q and
// dY stages). deferred_dq replaces the first two by the mbarriers ds_free / ds_ready, one per dSᵀ tile.
constexpr int kDsFreeBarrier = 1, kDsReadyBarrier = 2, kEpilogueBarrier = 3;

struct QueryStats {          // one query tile's row statistics
  float neg_lse2[kQueries];  // −lse·log2e
  float d[kQueries];
  int lo[kQueries];  // first allowed key; `tokens` for queries past the block's range (they see nothing)
};

struct BackwardArgs {
  CUtensorMap q_map, k_map, v_map, dy_map, dq_map;  // bf16 boxes of 64 / 128 / 128 / 64 rows; f32 dQ of 64
  CUtensorMap dk_map, dv_map;                       // bf16 boxes of 128 rows (the async epilogue adds through them)
  const float *lse, *dsum;
  const int* cu_seqlens;
  int* dq_turns;  // [heads, query tiles]: how many key blocks have added to the tile so far (zero at launch)
  int* tickets;   // how many blocks have started (zero at launch): a block's ticket names its work
  int r;
  __nv_bfloat16 *dk, *dv;
  int tokens, heads, window, query_tiles, key_blocks;
  float scale, scale_log2;
  bool overwrite_dk, overwrite_dv;  // async_epilogue: it stores dK / dV instead of adding them (GradWrite)
};

// The features of one configuration of the fused backward (attention/kernels.h names the production ones, the
// kernel ladder the rest); template arguments of the kernel.
struct BackwardFeatures {
  bool async_epilogue = false;  // dK/dV staged as bf16 and added by the copy engine (add_gradients_async)
  bool dq_before_dk = false;    // the dQ product issued before dK's
  bool deferred_dq = false;     // two dSᵀ tiles, each tile's dQ product issued after the next tile's products
};

// Shared memory (1024-byte aligned tiles for the swizzle), then the statistics, barriers and, but for deferred_dq, a
// copy of cu_seqlens. deferred_dq's second dSᵀ tile takes the room of that copy (the block would be 16 KB + 4·r bytes
// over the limit otherwise): deferred_dq reads cu_seqlens from global memory (cached), which only the producer's
// statistics and the block's set-up do.
template <bool kDeferredDq>
struct BlockTiles {
  static constexpr int kDsTiles = kDeferredDq ? 2 : 1;
  static constexpr int kDsBarriers = kDeferredDq ? kDsTiles : 0;  // ds_ready and ds_free each
  uint8_t *ks, *vs, *qs, *dys, *ds, *dq;
  QueryStats* stats;
  uint64_t *full, *empty, *kv_full, *dq_full, *dq_empty;  // dq_*: one per staging tile
  uint64_t *ds_ready, *ds_free;                           // deferred_dq: one per dSᵀ tile
  int* cu_copy;                                           // the shared copy of cu_seqlens (nullptr for deferred_dq)
  const int* cu;                                          // where this block reads cu_seqlens
  __device__ BlockTiles(unsigned char* raw, const int* cu_seqlens) {
    ks = align_1024(raw);
    vs = ks + kKeyTile;
    qs = vs + kKeyTile;               // kStages Q tiles
    dys = qs + kStages * kQueryTile;  // kStages dY tiles
    ds = dys + kStages * kQueryTile;  // kDsTiles dSᵀ tiles
    dq = ds + kDsTiles * kDsTile;     // kDqStages f32 dQ staging tiles
    stats = reinterpret_cast<QueryStats*>(dq + kDqStages * kDqTile);
    full = reinterpret_cast<uint64_t*>(stats + kStages);
    empty = full + kStages;
    kv_full = empty + kStages;
    dq_full = kv_full + 1;
    dq_empty = dq_full + kDqStages;
    ds_ready = dq_empty + kDqStages;
    ds_free = ds_ready + kDsBarriers;
    cu_copy = kDeferredDq ? nullptr : reinterpret_cast<int*>(ds_free + kDsBarriers);
    cu = kDeferredDq ? cu_seqlens : cu_copy;
  }
};
template <bool kDeferredDq>
constexpr size_t smem_bytes(int r) {
  using Tiles = BlockTiles<kDeferredDq>;
  constexpr int kBarriers = 2 * kStages + 1 + 2 * kDqStages + 2 * Tiles::kDsBarriers;
  return 1024 + 2 * kKeyTile + 2 * kStages * kQueryTile + Tiles::kDsTiles * kDsTile + kDqStages * kDqTile +
         kStages * sizeof(QueryStats) + kBarriers * sizeof(uint64_t) + (kDeferredDq ? 0 : r * sizeof(int));
}

// The block's keys and the query tiles that can see them (kernels/cuda/attention/schedule.h; its invariants are
// checked on the CPU by tests/attention/attention_schedule_test.cpp).
using KeyBlock = BackwardKeyBlock<kKeys, kQueries, kScoreTile>;

// Query tile n's stage and contribution c's dQ staging tile, with their barrier parities (attention/schedule.h).
using StageRing = BarrierRing<kStages>;
using DqRing = BarrierRing<kDqStages>;

__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// Spins until the tile's counter reaches `rank`. A counter that has not moved for ~10 s means a broken ordering
// (or a block that never started): the kernel traps (a launch error, not a hung process). No printf here: a call
// in the kernel makes ptxas serialise every wgmma (C7510).
__device__ __forceinline__ void wait_for_turn(const int* turn, int rank) {
  const long long start = clock64();
  while (load_acquire(turn) != rank) {
    if (clock64() - start > (20LL << 30)) __trap();
  }
}

// ---- producer warps -------------------------------------------------------------------------------------------

// Query tile n into stage n % kStages once the consumers have released the stage's previous tile: the copies
// first (their latency then covers the statistics' loads), then every lane's statistics and its arrival.
template <typename Tiles>
__device__ void load_query_tile(const BackwardArgs& a, const Tiles& t, const KeyBlock& b, int head, int n) {
  const int lane = threadIdx.x % 32, stage = StageRing::slot(n);
  const int q0 = b.s0 + n * kQueries;
  if (StageRing::refills(n)) tma::wait(t.empty + stage, StageRing::released_parity(n));
  if (lane == 0) {
    tma::expect_tx(t.full + stage, kStageTransferBytes);
    tma::load_head_rows(t.qs + stage * kQueryTile, kQuerySlab, &a.q_map, head, q0, t.full + stage);
    tma::load_head_rows(t.dys + stage * kQueryTile, kQuerySlab, &a.dy_map, head, q0, t.full + stage);
  }
  QueryStats& st = t.stats[stage];
#pragma unroll
  for (int i = 0; i < kQueries / 32; ++i) {
    const int row = lane + 32 * i, q = q0 + row;
    const bool valid = q <= b.q_end;
    st.neg_lse2[row] = valid ? -a.lse[static_cast<int64_t>(head) * a.tokens + q] * kLog2e : 0.f;
    st.d[row] = valid ? a.dsum[static_cast<int64_t>(head) * a.tokens + q] : 0.f;
    st.lo[row] = valid ? static_cast<int>(first_key(t.cu, a.r, q, a.window)) : a.tokens;
  }
  tma::arrive(t.full + stage);  // each lane's own statistics are released by its arrival
}

// Adds the staged dQ of query tile n (the block's `contribution`-th) into the accumulator in rank order.
template <typename Tiles>
__device__ void add_dq_in_order(const BackwardArgs& a, const Tiles& t, const KeyBlock& b, int head, int n,
                                int key_block, int contribution) {
  const int slot = DqRing::slot(contribution);
  const uint8_t* staged = t.dq + slot * kDqTile;
  const int lane = threadIdx.x % 32;
  const int q0 = b.s0 + n * kQueries, tile = q0 / kQueries;
  const int rank = KeyBlock::dq_rank(q0, a.tokens, key_block);  // key blocks above this one that add
  int* turn = a.dq_turns + static_cast<int64_t>(head) * a.query_tiles + tile;
  tma::wait(t.dq_full + slot, DqRing::filled_parity(contribution));
  if (lane == 0) {
    wait_for_turn(turn, rank);
    tma::fence_proxy_global();
#pragma unroll
    for (int box = 0; box < kDqBoxes; ++box) {
      const uint8_t* src = staged + box * kDqBox;
      if (rank == 0) {
        tma::store_3d(&a.dq_map, box * kDqBoxCols, head, q0, src);
      } else {
        tma::reduce_add_3d(&a.dq_map, box * kDqBoxCols, head, q0, src);
      }
    }
    tma::bulk_commit();
    tma::bulk_wait_shared_read();
    tma::arrive(t.dq_empty + slot);  // the staging tile may be refilled
    tma::bulk_wait_complete();
    tma::fence_proxy_global();
    store_release(turn, rank + 1);
  }
  __syncwarp();
}

// Warp 0 of the producer: the query tiles, one stage ahead of the consumers.
template <typename Tiles>
__device__ void load_query_tiles(const BackwardArgs& a, const Tiles& t, const KeyBlock& b, int head) {
  for (int n = 0; n < b.tiles; ++n) load_query_tile(a, t, b, head, n);
}

// Warps 1 and 2 of the producer: the staged dQ tiles of staging slot `slot` (every other contribution), so that one
// tile's ordered addition overlaps the next one's. Each works out which tiles the block adds to on its own (the
// statistics' stage may already hold a later tile).
template <typename Tiles>
__device__ void add_dq_tiles(const BackwardArgs& a, const Tiles& t, const KeyBlock& b, int head, int key_block,
                             int slot) {
  int contributions = 0;
  for (int n = 0; n < b.tiles; ++n) {
    const int q0 = b.s0 + n * kQueries;
    if (b.contributes(q0, a.tokens, static_cast<int>(first_key(t.cu, a.r, q0, a.window)))) {
      if (DqRing::slot(contributions) == slot) add_dq_in_order(a, t, b, head, n, key_block, contributions);
      ++contributions;
    }
  }
}

// ---- consumers -------------------------------------------------------------------------------------------------

// Writes this thread's dSᵀ fragments (rows = keys 64w + warpgroup_row, columns = the tile's queries) into the dSᵀ
// tile in the swizzled layout the dQ product reads MN-major.
__device__ __forceinline__ void store_ds(uint8_t* ds_tile, const uint32_t (&da)[kScoreTile / 16][4], int w) {
  const int c = threadIdx.x & 3;
#pragma unroll
  for (int kk = 0; kk < kScoreTile / 16; ++kk) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = kScoreTile * w + warpgroup_row(j & 1), chunk = 2 * kk + (j >> 1);
      *reinterpret_cast<uint32_t*>(ds_tile + wgmma::swizzled_offset(row, chunk) + 4 * c) = da[kk][j];
    }
  }
}

// dQ (64 queries × this warpgroup's 64 head-dim columns) = dS·K over the block's 128 keys; both from shared memory
// MN-major (dSᵀ rows and K rows are the reduction).
__device__ __forceinline__ void issue_dq(float (&dq)[kScoreAcc], uint32_t ds_addr, uint32_t k_addr, int w) {
  const uint64_t ds_desc = wgmma::mn_major(ds_addr, kDsTile), k_desc = wgmma::mn_major(k_addr + w * kKeySlab, kKeySlab);
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    const uint32_t rows = kk * 16 * wgmma::kSlabRowBytes;
    wgmma::mma_m64n64k16_ss_mn(dq, wgmma::advance(ds_desc, rows), wgmma::advance(k_desc, rows), kk > 0);
  }
}

// The warpgroup's dQ columns into the f32 staging boxes (128-byte swizzle, as the copy engine reads them).
__device__ __forceinline__ void stage_dq(uint8_t* dq_tile, const float (&dq)[kScoreAcc], int w) {
  const int c = threadIdx.x & 3;
#pragma unroll
  for (int nt = 0; nt < kScoreTile / 8; ++nt) {
    const int col = kScoreTile * w + 8 * nt + 2 * c, box = col / kDqBoxCols, in_box = col % kDqBoxCols;
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      const int q = warpgroup_row(row);
      uint8_t* cell = dq_tile + box * kDqBox + q * 128 + (((in_box / 4) ^ (q & 7)) << 4) + (in_box % 4) * 4;
      *reinterpret_cast<float2*>(cell) = make_float2(dq[4 * nt + 2 * row], dq[4 * nt + 2 * row + 1]);
    }
  }
}

// The async epilogue: scale·dK and dV rounded to bf16 into the (now idle) Q and dY stages, laid out as the K tile,
// then added into dk and dv by the copy engine (bf16 adds at L2, rows past the end skipped), or stored there when
// the call overwrites them, so the block's end waits for no global load. Costs one more rounding than the
// read-modify-write (of the increment, before the add).
template <typename Tiles>
__device__ void add_gradients_async(const BackwardArgs& a, const Tiles& t, const KeyBlock& b, int head,
                                    const float (&dk)[kRowAcc], const float (&dv)[kRowAcc]) {
  const int w = threadIdx.x / 128, c = threadIdx.x & 3;
  tma::named_sync(kEpilogueBarrier, kConsumerThreads);  // the other warpgroup's last products read the stages
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    const int r = kScoreTile * w + warpgroup_row(row);
#pragma unroll
    for (int nt = 0; nt < kHeadDim / 8; ++nt) {
      const uint32_t offset = (nt / 8) * kKeySlab + wgmma::swizzled_offset(r, nt % 8) + 4 * c;
      *reinterpret_cast<__nv_bfloat162*>(t.qs + offset) =
          __floats2bfloat162_rn(a.scale * dk[4 * nt + 2 * row], a.scale * dk[4 * nt + 2 * row + 1]);
      *reinterpret_cast<__nv_bfloat162*>(t.dys + offset) =
          __floats2bfloat162_rn(dv[4 * nt + 2 * row], dv[4 * nt + 2 * row + 1]);
    }
  }
  fence_async_proxy();
  tma::named_sync(kEpilogueBarrier, kConsumerThreads);
  if (threadIdx.x == 0) {
    // Each key block owns its keys' rows: a first writer of the gradient stores them (the bits of adding to zeros).
    auto write = [&](const CUtensorMap* map, bool overwrite, const uint8_t* tile) {
      for (int slab = 0; slab < 2; ++slab) {
        if (overwrite) {
          tma::store_3d(map, slab * wgmma::kSlabCols, head, b.s0, tile + slab * kKeySlab);
        } else {
          tma::reduce_add_3d(map, slab * wgmma::kSlabCols, head, b.s0, tile + slab * kKeySlab);
        }
      }
    };
    write(&a.dk_map, a.overwrite_dk, t.qs);
    write(&a.dv_map, a.overwrite_dv, t.dys);
    tma::bulk_commit();
    tma::bulk_wait_shared_read();  // the block may end once the copy engine has read its shared memory
  }
}

}  // namespace gpt::cuda::attn::fused_backward
