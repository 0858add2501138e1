// CUDA backward of kernels/attention.h, versions 4, 5 and 6 (kernels/cuda/attention_variants.h): one pass over key
// blocks with five products per tile pair instead of v3's seven, warp-specialised like forward v7/v8, and deterministic.
//
// One block = 128 consecutive keys × one head: two consumer warpgroups of 64 keys and a producer warpgroup.
//   - The producer's first warp streams the query tiles that can see the block (64 queries: Q, dY by TMA, plus each
//     row's −lse·log2e, D and first allowed key) into two stages on full/empty mbarriers.
//   - Per query tile each consumer warpgroup computes Sᵀ = K·Qᵀ and dPᵀ = V·dYᵀ for its 64 keys, Pᵀ and
//     dSᵀ = Pᵀ ⊙ (dPᵀ − D) in registers, dV += Pᵀ·dY and dK += dSᵀ·Q (register A operands), writes dSᵀ to shared
//     memory and, once both halves are there, its 64 columns of the tile's dQ = dS·K over all 128 keys (both
//     operands read MN-major). The f32 dQ tile goes to one of two staging tiles.
//   - Two more producer warps (one per staging tile) add the staged tile into a f32 dQ accumulator with the copy
//     engine (cp.reduce.async.bulk), in a fixed order: the key blocks that see a query tile add to it from the
//     highest block down, each waiting for a per-tile counter in global memory to reach its rank. The first (the
//     diagonal block) stores instead of adding, so the accumulator needs no clearing. The sum is thus the same on
//     every run: f32 additions in one order.
//   - A last kernel adds scale · dQ (rounded once) into dq.
//   - dK and dV: v4 adds them into dk and dv with a read-modify-write by the consumer threads (rounded once); v5 stages
//     them as bf16 in shared memory and has the copy engine add them (add_gradients_async).
//   - v6 is v5 with the dQ product issued before dK's (dq_tile<true>): its staging overlaps dK's product.
// Progress does not rely on the order in which the hardware starts blocks: each block takes its (head, key block)
// from a ticket counter when it starts, tickets run the key blocks of a head from the last to the first, and a
// block only waits on blocks of its head with smaller tickets, which have therefore started (and hold their SM
// until they finish). The block with the smallest unfinished ticket never waits.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_launch.h"
#include "kernels/cuda/attention_variants.h"
#include "kernels/cuda/attention_wgmma_common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/tma.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace gpt::cuda {

namespace {

using namespace attn;

constexpr int kConsumers = 2, kKeys = 64 * kConsumers, kQueries = kScoreTile, kStages = 2;
constexpr int kConsumerThreads = 128 * kConsumers, kConsumerWarps = 4 * kConsumers;
constexpr int kThreads = kConsumerThreads + 128;  // + the producer warpgroup (three warps work: loads, dQ ×2)
constexpr int kConsumerRegisters = 240, kProducerRegisters = 24;
static_assert(kConsumerThreads * kConsumerRegisters + 128 * kProducerRegisters <= 65536, "register file");

constexpr int kKeySlab = kKeys * wgmma::kSlabRowBytes, kKeyTile = 2 * kKeySlab;        // K or V: 16 / 32 KB
constexpr int kQuerySlab = kQueries * wgmma::kSlabRowBytes, kQueryTile = 2 * kQuerySlab;  // Q or dY: 8 / 16 KB
constexpr int kDsTile = kKeys * wgmma::kSlabRowBytes;  // dSᵀ: 128 key rows × 64 query columns, one slab, 16 KB
constexpr int kDqBoxCols = 32, kDqBoxes = kHeadDim / kDqBoxCols;  // f32 staging: 4 boxes of [64 × 32], 128 B rows
constexpr int kDqBox = kQueries * 128, kDqTile = kDqBoxes * kDqBox;  // 8 / 32 KB
constexpr int kDqStages = 2;  // staging tiles, each with its own adder warp: contribution k uses tile k % 2
constexpr uint32_t kStageTransferBytes = 2 * kQueryTile;  // a Q tile and a dY tile
// Named barriers of the two consumer warpgroups: dSᵀ may be overwritten (both finished the last dQ product) / dSᵀ
// holds both halves / both finished their last tile (v5's epilogue reuses the Q and dY stages).
constexpr int kDsFreeBarrier = 1, kDsReadyBarrier = 2, kEpilogueBarrier = 3;

struct QueryStats {       // one query tile's row statistics
  float neg_lse2[kQueries];  // −lse·log2e
  float d[kQueries];
  int lo[kQueries];  // first allowed key; `tokens` for queries past the block's range (they see nothing)
};

struct BackwardArgs {
  CUtensorMap q_map, k_map, v_map, dy_map, dq_map;  // bf16 boxes of 64 / 128 / 128 / 64 rows; f32 dQ of 64
  CUtensorMap dk_map, dv_map;                       // bf16 boxes of 128 rows (v5's epilogue adds through them)
  const float *lse, *dsum;
  const int* cu_seqlens;
  int* dq_turns;  // [heads, query tiles]: how many key blocks have added to the tile so far (zero at launch)
  int* tickets;   // how many blocks have started (zero at launch): a block's ticket names its work
  int r;
  __nv_bfloat16 *dk, *dv;
  int tokens, heads, window, query_tiles, key_blocks;
  float scale, scale_log2;
};

// Shared memory (1024-byte aligned tiles for the swizzle), then the statistics, barriers and cu_seqlens.
struct BlockTiles {
  uint8_t *ks, *vs, *qs, *dys, *ds, *dq;
  QueryStats* stats;
  uint64_t *full, *empty, *kv_full, *dq_full, *dq_empty;  // dq_*: one per staging tile
  int* cu;
  __device__ explicit BlockTiles(unsigned char* raw) {
    ks = align_1024(raw);
    vs = ks + kKeyTile;
    qs = vs + kKeyTile;                 // kStages Q tiles
    dys = qs + kStages * kQueryTile;    // kStages dY tiles
    ds = dys + kStages * kQueryTile;    // the dSᵀ tile
    dq = ds + kDsTile;                  // kDqStages f32 dQ staging tiles
    stats = reinterpret_cast<QueryStats*>(dq + kDqStages * kDqTile);
    full = reinterpret_cast<uint64_t*>(stats + kStages);
    empty = full + kStages;
    kv_full = empty + kStages;
    dq_full = kv_full + 1;
    dq_empty = dq_full + kDqStages;
    cu = reinterpret_cast<int*>(dq_empty + kDqStages);
  }
};
constexpr size_t smem_bytes(int r) {
  return 1024 + 2 * kKeyTile + 2 * kStages * kQueryTile + kDsTile + kDqStages * kDqTile +
         kStages * sizeof(QueryStats) + (2 * kStages + 1 + 2 * kDqStages) * sizeof(uint64_t) + r * sizeof(int);
}

// The block's keys and the query tiles that can see them (kernels/cuda/attention_schedule.h; its invariants are
// checked on the CPU by tests/attention/attention_schedule_test.cpp).
using KeyBlock = BackwardKeyBlock<kKeys, kQueries, kScoreTile>;

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
__device__ void load_query_tile(const BackwardArgs& a, const BlockTiles& t, const KeyBlock& b, int head, int n) {
  const int lane = threadIdx.x % 32, stage = n % kStages, use = n / kStages;
  const int q0 = b.s0 + n * kQueries;
  if (use > 0) tma::wait(t.empty + stage, (use - 1) & 1);
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
__device__ void add_dq_in_order(const BackwardArgs& a, const BlockTiles& t, const KeyBlock& b, int head, int n,
                                int key_block, int contribution) {
  const int slot = contribution % kDqStages, use = contribution / kDqStages;
  const uint8_t* staged = t.dq + slot * kDqTile;
  const int lane = threadIdx.x % 32;
  const int q0 = b.s0 + n * kQueries, tile = q0 / kQueries;
  const int rank = KeyBlock::dq_rank(q0, a.tokens, key_block);  // key blocks above this one that add
  int* turn = a.dq_turns + static_cast<int64_t>(head) * a.query_tiles + tile;
  tma::wait(t.dq_full + slot, use & 1);
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
__device__ void load_query_tiles(const BackwardArgs& a, const BlockTiles& t, const KeyBlock& b, int head) {
  for (int n = 0; n < b.tiles; ++n) load_query_tile(a, t, b, head, n);
}

// Warps 1 and 2 of the producer: the staged dQ tiles of staging slot `slot` (every other contribution), so that one
// tile's ordered addition overlaps the next one's. Each works out which tiles the block adds to on its own (the
// statistics' stage may already hold a later tile).
__device__ void add_dq_tiles(const BackwardArgs& a, const BlockTiles& t, const KeyBlock& b, int head, int key_block,
                             int slot) {
  int contributions = 0;
  for (int n = 0; n < b.tiles; ++n) {
    const int q0 = b.s0 + n * kQueries;
    if (b.contributes(q0, a.tokens, static_cast<int>(first_key(t.cu, a.r, q0, a.window)))) {
      if (contributions % kDqStages == slot) add_dq_in_order(a, t, b, head, n, key_block, contributions);
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

// The tile's dQ once both dSᵀ halves are in shared memory: product, staging, hand-over to the producer; returns
// with every wgmma group of this warpgroup completed (also the dK/dV products issued before). kThenDk (v6): dK +=
// dSᵀ·Q is issued after the dQ product here (dV went out before the dSᵀ barriers), so that the dQ staging runs
// while the tensor cores still work on dK instead of after every product has completed.
template <bool kThenDk>
__device__ __forceinline__ void dq_tile(const BlockTiles& t, int contribution, int w, float (&dk)[kRowAcc],
                                        const uint32_t (&da)[kScoreTile / 16][4], uint32_t q_addr) {
  const int slot = contribution % kDqStages, use = contribution / kDqStages;
  fence_async_proxy();  // dSᵀ was written through the generic proxy
  tma::named_sync(kDsReadyBarrier, kConsumerThreads);
  if (use > 0) tma::wait(t.dq_empty + slot, (use - 1) & 1);
  float dq[kScoreAcc];
  wgmma::fence();
  issue_dq(dq, wgmma::smem_addr(t.ds), wgmma::smem_addr(t.ks), w);
  wgmma::commit();
  if constexpr (kThenDk) {
    issue_accumulate(dk, da, q_addr);
    wgmma::commit();
    wgmma::wait<1>();  // dV (issued before) and dQ have completed; dK may still run
  } else {
    wgmma::wait<0>();
  }
  wgmma::fence_operands(dq);
  stage_dq(t.dq + slot * kDqTile, dq, w);
  fence_async_proxy();
  __syncwarp();
  if ((threadIdx.x & 31) == 0) tma::arrive(t.dq_full + slot);
  if constexpr (kThenDk) wgmma::wait<0>();
}

// v5's epilogue: scale·dK and dV rounded to bf16 into the (now idle) Q and dY stages, laid out as the K tile, then
// added into dk and dv by the copy engine (bf16 adds at L2, rows past the end skipped), so the block's end waits
// for no global load. Costs one more rounding than v4's read-modify-write (of the increment, before the add).
__device__ void add_gradients_async(const BackwardArgs& a, const BlockTiles& t, const KeyBlock& b, int head,
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
    tma::reduce_add_3d(&a.dk_map, 0, head, b.s0, t.qs);
    tma::reduce_add_3d(&a.dk_map, wgmma::kSlabCols, head, b.s0, t.qs + kKeySlab);
    tma::reduce_add_3d(&a.dv_map, 0, head, b.s0, t.dys);
    tma::reduce_add_3d(&a.dv_map, wgmma::kSlabCols, head, b.s0, t.dys + kKeySlab);
    tma::bulk_commit();
    tma::bulk_wait_shared_read();  // the block may end once the copy engine has read its shared memory
  }
}

template <bool kAsyncEpilogue, bool kDqBeforeDk>
__device__ void consume(const BackwardArgs& a, const BlockTiles& t, const KeyBlock& b, int head) {
  const int w = threadIdx.x / 128, c = threadIdx.x & 3;
  const int k0 = b.s0 + kScoreTile * w;
  const int key_row[2] = {k0 + warpgroup_row(0), k0 + warpgroup_row(1)};
  const uint32_t k_addr = wgmma::smem_addr(t.ks) + w * kScoreTile * wgmma::kSlabRowBytes;
  const uint32_t v_addr = wgmma::smem_addr(t.vs) + w * kScoreTile * wgmma::kSlabRowBytes;
  float dk[kRowAcc] = {}, dv[kRowAcc] = {};
  int contributions = 0;
  tma::wait(t.kv_full, 0);
  for (int n = 0; n < b.tiles; ++n) {
    const int stage = n % kStages, q0 = b.s0 + n * kQueries;
    tma::wait(t.full + stage, (n / kStages) & 1);
    const QueryStats& st = t.stats[stage];
    const TileKind kind = b.classify(w, q0, a.tokens, st.lo);
    const bool adds_dq = b.contributes(q0, a.tokens, st.lo[0]);
    if (kind != TileKind::skip) {
      const uint32_t q_addr = wgmma::smem_addr(t.qs + stage * kQueryTile);
      const uint32_t dy_addr = wgmma::smem_addr(t.dys + stage * kQueryTile);
      float sT[kScoreAcc], dpT[kScoreAcc];
      wgmma::fence();
      issue_product(sT, k_addr, kKeySlab, q_addr, kQuerySlab);
      wgmma::commit();
      issue_product(dpT, v_addr, kKeySlab, dy_addr, kQuerySlab);
      wgmma::commit();
      wgmma::wait<1>();  // Sᵀ; dPᵀ may still run during the exponentials
      wgmma::fence_operands(sT);
      // sT becomes Pᵀ, then dpT becomes dSᵀ (rows = keys, columns = queries).
#pragma unroll
      for (int nt = 0; nt < kQueries / 8; ++nt) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int i = 4 * nt + j, col = nt * 8 + 2 * c + (j & 1);
          float p = fast_exp2(fmaf(sT[i], a.scale_log2, st.neg_lse2[col]));
          if (kind == TileKind::masked) {
            const int q = q0 + col, key = key_row[j >> 1];
            if (!(key < a.tokens && key <= q && key >= st.lo[col])) p = 0.f;
          }
          sT[i] = p;
        }
      }
      wgmma::wait<0>();
      wgmma::fence_operands(dpT);
#pragma unroll
      for (int i = 0; i < kScoreAcc; ++i) dpT[i] = sT[i] * (dpT[i] - st.d[(i / 4) * 8 + 2 * c + (i & 1)]);
      uint32_t pa[kScoreTile / 16][4], da[kScoreTile / 16][4];
      pack_fragments(sT, pa);
      pack_fragments(dpT, da);
      wgmma::fence_operands(dv);
      wgmma::fence_operands(dk);
      wgmma::fence();
      if constexpr (kDqBeforeDk) {
        issue_accumulate(dv, pa, dy_addr);
        wgmma::commit();
        tma::named_sync(kDsFreeBarrier, kConsumerThreads);
        store_ds(t.ds, da, w);
        dq_tile<true>(t, contributions, w, dk, da, q_addr);
      } else {
        issue_accumulate(dv, pa, dy_addr);
        issue_accumulate(dk, da, q_addr);
        wgmma::commit();
        tma::named_sync(kDsFreeBarrier, kConsumerThreads);
        store_ds(t.ds, da, w);  // adds_dq holds: this warpgroup's keys meet the tile
        dq_tile<false>(t, contributions, w, dk, da, q_addr);  // waits for dK/dV as well
      }
      wgmma::fence_operands(dv);
      wgmma::fence_operands(dk);
      ++contributions;
    } else if (adds_dq) {  // the other warpgroup's keys meet the tile, these do not: zero rows of dSᵀ
      const uint32_t zero[kScoreTile / 16][4] = {};
      tma::named_sync(kDsFreeBarrier, kConsumerThreads);
      store_ds(t.ds, zero, w);
      dq_tile<false>(t, contributions, w, dk, zero, 0);  // no dK here: q_addr unused
      ++contributions;
    }
    if ((threadIdx.x & 31) == 0) tma::arrive(t.empty + stage);
  }
  if constexpr (kAsyncEpilogue) {
    add_gradients_async(a, t, b, head, dk, dv);
  } else {
    add_accumulator_rows<2>({GradientRows{a.dk, dk, k0, a.scale}, GradientRows{a.dv, dv, k0, 1.f}}, a.tokens,
                            a.heads, head);
  }
}

template <bool kAsyncEpilogue, bool kDqBeforeDk>
__global__ void __launch_bounds__(kThreads, 1) attention_backward_fused_kernel(const __grid_constant__ BackwardArgs a) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ int ticket;
  const BlockTiles t(smem_raw);
  for (int i = threadIdx.x; i < a.r; i += kThreads) t.cu[i] = a.cu_seqlens[i];
  if (threadIdx.x == 0) {
    ticket = atomicAdd(a.tickets, 1);
    for (int s = 0; s < kStages; ++s) {
      tma::init(t.full + s, 32);  // every loader lane (the statistics); the bytes are announced by expect_tx
      tma::init(t.empty + s, kConsumerWarps);
    }
    tma::init(t.kv_full, 1);
    for (int s = 0; s < kDqStages; ++s) {
      tma::init(t.dq_full + s, kConsumerWarps);
      tma::init(t.dq_empty + s, 1);
    }
    tma::fence_init();
  }
  __syncthreads();  // the last block-wide barrier: the roles part here
  const int head = ticket / a.key_blocks, key_block = a.key_blocks - 1 - ticket % a.key_blocks;
  const KeyBlock b(t.cu, a.r, key_block * kKeys, a.tokens, a.window);
  if (threadIdx.x >= kConsumerThreads) {
    lower_registers<kProducerRegisters>();
    const int warp = (threadIdx.x - kConsumerThreads) / 32;
    if (warp == 0) {
      if (threadIdx.x == kConsumerThreads) {
        tma::arrive_expect_tx(t.kv_full, 2 * kKeyTile);
        tma::load_head_rows(t.ks, kKeySlab, &a.k_map, head, b.s0, t.kv_full);
        tma::load_head_rows(t.vs, kKeySlab, &a.v_map, head, b.s0, t.kv_full);
      }
      load_query_tiles(a, t, b, head);
    } else if (warp <= kDqStages) {
      add_dq_tiles(a, t, b, head, key_block, warp - 1);
    }
    return;
  }
  raise_registers<kConsumerRegisters>();
  consume<kAsyncEpilogue, kDqBeforeDk>(a, t, b, head);
}

// dq += scale · dq_accum, rounded once; 4 elements per thread.
__global__ void add_scaled_dq_kernel(__nv_bfloat16* dq, const float* accum, int64_t quads, float scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= quads) return;
  const float4 g = reinterpret_cast<const float4*>(accum)[i];
  auto* cell = reinterpret_cast<__nv_bfloat162*>(dq) + 2 * i;
  const float2 lo = __bfloat1622float2(cell[0]), hi = __bfloat1622float2(cell[1]);
  cell[0] = __floats2bfloat162_rn(lo.x + scale * g.x, lo.y + scale * g.y);
  cell[1] = __floats2bfloat162_rn(hi.x + scale * g.z, hi.y + scale * g.w);
}

template <bool kAsyncEpilogue, bool kDqBeforeDk = false>
void launch_fused_backward(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale) {
  if (!tma_aligned(q.raw()) || !tma_aligned(k.raw()) || !tma_aligned(v.raw()) || !tma_aligned(dy.raw()) ||
      !tma_aligned(dq.raw()) || !tma_aligned(dk.raw()) || !tma_aligned(dv.raw())) {
    attention_backward_v3(dy, q, k, v, cu_seqlens, y, lse, dq, dk, dv, window, scale);  // the copy engine's limit
    return;
  }
  const AttentionProblem p = attention_problem(q, cu_seqlens, "attention_backward");
  if (p.tokens == 0) return;
  const cudaStream_t stream = current_stream();
  const AttentionScratch dsum = attention_row_dot(dy, y, p);
  const int query_tiles = static_cast<int>((p.tokens + kQueries - 1) / kQueries);
  const int key_blocks = static_cast<int>((p.tokens + kKeys - 1) / kKeys);

  // Scratch: the f32 dQ accumulator (every element is stored before it is added to), the per-tile counters and
  // the ticket counter, the last two zeroed by one memset.
  const size_t accum_floats = static_cast<size_t>(p.tokens) * p.heads * kHeadDim;
  const size_t turn_ints = static_cast<size_t>(p.heads) * query_tiles, counter_ints = turn_ints + 1;
  auto* raw = static_cast<float*>(stream_ordered_alloc((accum_floats + counter_ints) * sizeof(float), stream));
  const AttentionScratch scratch(raw, StreamFree{stream});
  int* turns = reinterpret_cast<int*>(raw + accum_floats);
  GPT_CUDA_CHECK(cudaMemsetAsync(turns, 0, counter_ints * sizeof(int), stream));

  const int win = static_cast<int>(window < p.tokens ? window : p.tokens);
  const BackwardArgs args{
      head_rows_tensor_map(device_bf16(q), p.tokens, p.heads, kQueries, "attention_backward q"),
      head_rows_tensor_map(device_bf16(k), p.tokens, p.heads, kKeys, "attention_backward k"),
      head_rows_tensor_map(device_bf16(v), p.tokens, p.heads, kKeys, "attention_backward v"),
      head_rows_tensor_map(device_bf16(dy), p.tokens, p.heads, kQueries, "attention_backward dy"),
      head_rows_tensor_map_f32(raw, p.tokens, p.heads, kQueries, "attention_backward dq accumulator"),
      head_rows_tensor_map(device_bf16(dk), p.tokens, p.heads, kKeys, "attention_backward dk"),
      head_rows_tensor_map(device_bf16(dv), p.tokens, p.heads, kKeys, "attention_backward dv"),
      static_cast<const float*>(lse.raw()),
      dsum.get(),
      device_i32(cu_seqlens),
      turns,
      turns + turn_ints,
      p.r,
      device_bf16(dk),
      device_bf16(dv),
      static_cast<int>(p.tokens),
      p.heads,
      win,
      query_tiles,
      key_blocks,
      scale,
      scale * kLog2e};
  const size_t smem = smem_bytes(p.r);
  set_smem_limit(attention_backward_fused_kernel<kAsyncEpilogue, kDqBeforeDk>, smem, "attention_backward");
  const auto blocks = static_cast<unsigned>(key_blocks) * static_cast<unsigned>(p.heads);  // one per ticket
  attention_backward_fused_kernel<kAsyncEpilogue, kDqBeforeDk><<<blocks, kThreads, smem, stream>>>(args);
  GPT_CUDA_CHECK_LAUNCH();

  const int64_t quads = static_cast<int64_t>(accum_floats / 4);
  add_scaled_dq_kernel<<<static_cast<unsigned>((quads + 255) / 256), 256, 0, stream>>>(device_bf16(dq), raw, quads,
                                                                                     scale);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_backward_v4(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale) {
  launch_fused_backward<false>(dy, q, k, v, cu_seqlens, y, lse, dq, dk, dv, window, scale);
}

void attention_backward_v5(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale) {
  launch_fused_backward<true>(dy, q, k, v, cu_seqlens, y, lse, dq, dk, dv, window, scale);
}

void attention_backward_v6(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale) {
  launch_fused_backward<true, true>(dy, q, k, v, cu_seqlens, y, lse, dq, dk, dv, window, scale);
}

}  // namespace gpt::cuda
