#pragma once
// The fused CUDA backward of kernels/attention.h, configured by BackwardFeatures (attention/backward_block.cuh): one
// pass over key blocks with five products per tile pair instead of the two-pass fallback's seven, warp-specialised
// like the forward (attention/forward.cuh), and deterministic. The block's layout, arguments and producer warps are
// in attention/backward_block.cuh; the consumers, the kernel and its launch here. attention/backward.cu instantiates
// the promoted features and the candidate; the kernel ladder (kernels/cuda/ladder/backward_fused.cu) the superseded
// ones. Internal linkage: each including file gets its own kernels.
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
//   - dK and dV: without async_epilogue the consumer threads add them into dk and dv with a read-modify-write
//     (rounded once); with it they are staged as bf16 in shared memory and the copy engine adds them
//     (add_gradients_async).
//   - dq_before_dk: the dQ product is issued before dK's (dq_tile<true>), so that its staging overlaps dK's product.
//   - deferred_dq: two dSᵀ tiles on mbarriers and each tile's dQ product issued one tile late (consume_deferred),
//     so that the two consumer warpgroups need not meet at every tile.
// Progress does not rely on the order in which the hardware starts blocks: each block takes its (head, key block)
// from a ticket counter when it starts, tickets run the key blocks of a head from the last to the first, and a
// block only waits on blocks of its head with smaller tickets, which have therefore started (and hold their SM
// until they finish). The block with the smallest unfinished ticket never waits.
#include <cuda.h>
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/attention/backward_block.cuh"
#include "kernels/cuda/attention/fallback.h"
#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/attention/launch.h"
#include "kernels/cuda/attention/wgmma_common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/tma.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace gpt::cuda {

namespace {

using namespace attn;
using namespace attn::fused_backward;

// This warpgroup's 64 keys against one query tile: Sᵀ = K·Qᵀ and dPᵀ = V·dYᵀ, then Pᵀ and dSᵀ = Pᵀ ⊙ (dPᵀ − D)
// (rows = keys, columns = queries) as the A fragments of the dV and dK products. Returns with no wgmma group of the
// warpgroup pending.
__device__ __forceinline__ void tile_gradients(const BackwardArgs& a, const QueryStats& st, TileKind kind, int q0,
                                               const int (&key_row)[2], uint32_t k_addr, uint32_t v_addr,
                                               uint32_t q_addr, uint32_t dy_addr, uint32_t (&pa)[kScoreTile / 16][4],
                                               uint32_t (&da)[kScoreTile / 16][4]) {
  const int c = threadIdx.x & 3;
  float sT[kScoreAcc], dpT[kScoreAcc];
  wgmma::fence();
  issue_product(sT, k_addr, kKeySlab, q_addr, kQuerySlab);
  wgmma::commit();
  issue_product(dpT, v_addr, kKeySlab, dy_addr, kQuerySlab);
  wgmma::commit();
  wgmma::wait<1>();  // Sᵀ; dPᵀ may still run during the exponentials
  wgmma::fence_operands(sT);
  // sT becomes Pᵀ, then dpT becomes dSᵀ.
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
  pack_fragments(sT, pa);
  pack_fragments(dpT, da);
}

// The block's end for the consumers: dK and dV (this warpgroup's 64 keys) added into dk and dv.
template <bool kAsyncEpilogue, typename Tiles>
__device__ __forceinline__ void add_gradients(const BackwardArgs& a, const Tiles& t, const KeyBlock& b, int head,
                                              const float (&dk)[kRowAcc], const float (&dv)[kRowAcc], int k0) {
  if constexpr (kAsyncEpilogue) {
    add_gradients_async(a, t, b, head, dk, dv);
  } else {
    add_accumulator_rows<2>({GradientRows{a.dk, dk, k0, a.scale}, GradientRows{a.dv, dv, k0, 1.f}}, a.tokens, a.heads,
                            head);
  }
}

// What a consumer warpgroup keeps for the whole block: its 64 keys and their K / V rows in shared memory.
struct ConsumerKeys {
  int w, k0;
  int key_row[2];  // this thread's two accumulator rows
  uint32_t k_addr, v_addr;
  template <typename Tiles>
  __device__ ConsumerKeys(const Tiles& t, const KeyBlock& b) : w(threadIdx.x / 128), k0(b.s0 + kScoreTile * w) {
    key_row[0] = k0 + warpgroup_row(0);
    key_row[1] = k0 + warpgroup_row(1);
    k_addr = wgmma::smem_addr(t.ks) + w * kScoreTile * wgmma::kSlabRowBytes;
    v_addr = wgmma::smem_addr(t.vs) + w * kScoreTile * wgmma::kSlabRowBytes;
  }
};

// Query tile n as a consumer sees it once loaded: its stage, statistics, how this warpgroup's keys meet it and
// whether the block adds to its dQ (then both warpgroups take part in the tile's dQ product).
struct QueryTile {
  int stage, q0;
  const QueryStats* st;
  TileKind kind;
  bool adds_dq;
  template <typename Tiles>
  __device__ QueryTile(const BackwardArgs& a, const Tiles& t, const KeyBlock& b, int n, int w)
      : stage(StageRing::slot(n)), q0(b.s0 + n * kQueries), st(&t.stats[stage]) {
    tma::wait(t.full + stage, StageRing::filled_parity(n));
    kind = b.classify(w, q0, a.tokens, st->lo);
    adds_dq = b.contributes(q0, a.tokens, st->lo[0]);
  }
};

// Sᵀ, dPᵀ and the Pᵀ / dSᵀ fragments of tile q for these keys (tile_gradients), returning the tile's Q and dY
// addresses for the dK / dV products.
template <typename Tiles>
__device__ __forceinline__ void tile_fragments(const BackwardArgs& a, const Tiles& t, const ConsumerKeys& keys,
                                               const QueryTile& q, uint32_t& q_addr, uint32_t& dy_addr,
                                               uint32_t (&pa)[kScoreTile / 16][4], uint32_t (&da)[kScoreTile / 16][4]) {
  q_addr = wgmma::smem_addr(t.qs + q.stage * kQueryTile);
  dy_addr = wgmma::smem_addr(t.dys + q.stage * kQueryTile);
  tile_gradients(a, *q.st, q.kind, q.q0, keys.key_row, keys.k_addr, keys.v_addr, q_addr, dy_addr, pa, da);
}

// ---- one dSᵀ tile: the two warpgroups meet at every tile's dSᵀ -------------------------------------------------

// The tile's dQ once both dSᵀ halves are in shared memory: product, staging, hand-over to the producer; returns with
// every wgmma group of this warpgroup completed (also the dK/dV products issued before). kThenDk (dq_before_dk): dK +=
// dSᵀ·Q is issued after the dQ product here (dV went out before the dSᵀ barriers), so that the dQ staging runs while
// the tensor cores still work on dK instead of after every product has completed.
template <bool kThenDk>
__device__ __forceinline__ void dq_tile(const BlockTiles<false>& t, int contribution, int w, float (&dk)[kRowAcc],
                                        const uint32_t (&da)[kScoreTile / 16][4], uint32_t q_addr) {
  const int slot = DqRing::slot(contribution);
  fence_async_proxy();  // dSᵀ was written through the generic proxy
  tma::named_sync(kDsReadyBarrier, kConsumerThreads);
  if (DqRing::refills(contribution)) tma::wait(t.dq_empty + slot, DqRing::released_parity(contribution));
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

template <bool kAsyncEpilogue, bool kDqBeforeDk>
__device__ void consume(const BackwardArgs& a, const BlockTiles<false>& t, const KeyBlock& b, int head) {
  const ConsumerKeys keys(t, b);
  const int w = keys.w;
  float dk[kRowAcc] = {}, dv[kRowAcc] = {};
  int contributions = 0;
  tma::wait(t.kv_full, 0);
  for (int n = 0; n < b.tiles; ++n) {
    const QueryTile tile(a, t, b, n, w);
    if (tile.kind != TileKind::skip) {
      uint32_t q_addr, dy_addr, pa[kScoreTile / 16][4], da[kScoreTile / 16][4];
      tile_fragments(a, t, keys, tile, q_addr, dy_addr, pa, da);
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
        store_ds(t.ds, da, w);                                // adds_dq holds: this warpgroup's keys meet the tile
        dq_tile<false>(t, contributions, w, dk, da, q_addr);  // waits for dK/dV as well
      }
      wgmma::fence_operands(dv);
      wgmma::fence_operands(dk);
      ++contributions;
    } else if (tile.adds_dq) {  // the other warpgroup's keys meet the tile, these do not: zero rows of dSᵀ
      const uint32_t zero[kScoreTile / 16][4] = {};
      tma::named_sync(kDsFreeBarrier, kConsumerThreads);
      store_ds(t.ds, zero, w);
      dq_tile<false>(t, contributions, w, dk, zero, 0);  // no dK here: q_addr unused
      ++contributions;
    }
    if ((threadIdx.x & 31) == 0) tma::arrive(t.empty + tile.stage);
  }
  add_gradients<kAsyncEpilogue>(a, t, b, head, dk, dv, keys.k0);
}

// ---- deferred_dq: each tile's dQ product one tile late ----------------------------------------------------------
// A warpgroup publishes its half of dSᵀ(c) and goes on to the next tile's products, then issues dQ(c − 1), whose
// halves are both there unless the other warpgroup is more than a tile behind. The two therefore drift up to a tile
// apart, so that one's exponentials overlap the other's products; with one dSᵀ tile they meet twice per tile.
// The sums and their order are those of one dSᵀ tile: deferred_dq gives the same bits.

// Contribution c's dSᵀ tile (attention/schedule.h).
using DsRing = BarrierRing<BlockTiles<true>::kDsTiles>;

// This warpgroup's half of the contribution's dSᵀ tile, once both warpgroups' dQ products have finished reading
// the tile's previous contents (contribution − 2).
__device__ __forceinline__ void publish_ds(const BlockTiles<true>& t, int contribution,
                                           const uint32_t (&da)[kScoreTile / 16][4], int w) {
  const int tile = DsRing::slot(contribution);
  if (DsRing::refills(contribution)) tma::wait(t.ds_free + tile, DsRing::released_parity(contribution));
  store_ds(t.ds + tile * kDsTile, da, w);
  fence_async_proxy();  // written through the generic proxy, read by wgmma
  __syncwarp();
  if ((threadIdx.x & 31) == 0) tma::arrive(t.ds_ready + tile);
}

// The contribution's dQ product once both halves of its dSᵀ tile are published: product, release of the dSᵀ tile,
// staging, hand-over to the adder warp. Returns with every wgmma group of this warpgroup completed (the dK/dV
// products issued before too).
__device__ __forceinline__ void deferred_dq_tile(const BlockTiles<true>& t, int contribution, int w) {
  const int tile = DsRing::slot(contribution), slot = DqRing::slot(contribution);
  tma::wait(t.ds_ready + tile, DsRing::filled_parity(contribution));
  if (DqRing::refills(contribution)) tma::wait(t.dq_empty + slot, DqRing::released_parity(contribution));
  float dq[kScoreAcc];
  wgmma::fence();
  issue_dq(dq, wgmma::smem_addr(t.ds + tile * kDsTile), wgmma::smem_addr(t.ks), w);
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operands(dq);
  __syncwarp();
  if ((threadIdx.x & 31) == 0) tma::arrive(t.ds_free + tile);
  stage_dq(t.dq + slot * kDqTile, dq, w);
  fence_async_proxy();
  __syncwarp();
  if ((threadIdx.x & 31) == 0) tma::arrive(t.dq_full + slot);
}

template <bool kAsyncEpilogue>
__device__ void consume_deferred(const BackwardArgs& a, const BlockTiles<true>& t, const KeyBlock& b, int head) {
  const ConsumerKeys keys(t, b);
  const int w = keys.w;
  float dk[kRowAcc] = {}, dv[kRowAcc] = {};
  int contributions = 0;  // dSᵀ tiles published; the last one's dQ product is still to be issued
  tma::wait(t.kv_full, 0);
  for (int n = 0; n < b.tiles; ++n) {
    const QueryTile tile(a, t, b, n, w);
    if (tile.kind != TileKind::skip) {
      uint32_t q_addr, dy_addr, pa[kScoreTile / 16][4], da[kScoreTile / 16][4];
      tile_fragments(a, t, keys, tile, q_addr, dy_addr, pa, da);
      wgmma::fence_operands(dv);
      wgmma::fence_operands(dk);
      wgmma::fence();
      issue_accumulate(dv, pa, dy_addr);
      issue_accumulate(dk, da, q_addr);
      wgmma::commit();
      publish_ds(t, contributions, da, w);  // adds_dq holds: this warpgroup's keys meet the tile
      if (contributions > 0) {
        deferred_dq_tile(t, contributions - 1, w);  // waits for dK/dV as well
      } else {
        wgmma::wait<0>();
      }
      wgmma::fence_operands(dv);
      wgmma::fence_operands(dk);
      ++contributions;
    } else if (tile.adds_dq) {  // the other warpgroup's keys meet the tile, these do not: zero rows of dSᵀ
      const uint32_t zero[kScoreTile / 16][4] = {};
      publish_ds(t, contributions, zero, w);
      if (contributions > 0) deferred_dq_tile(t, contributions - 1, w);
      ++contributions;
    }
    if ((threadIdx.x & 31) == 0) tma::arrive(t.empty + tile.stage);  // Q, dY and statistics of tile n are read
  }
  if (contributions > 0) deferred_dq_tile(t, contributions - 1, w);
  add_gradients<kAsyncEpilogue>(a, t, b, head, dk, dv, keys.k0);
}

// ---- the kernel ----------------------------------------------------------------------------------------------------

// The features as separate flags: nvcc's host stubs do not take a class-type template argument for a kernel.
template <bool kAsyncEpilogue, bool kDqBeforeDk, bool kDeferredDq>
__global__ void __launch_bounds__(kThreads, 1) attention_backward_fused_kernel(const __grid_constant__ BackwardArgs a) {
  constexpr BackwardFeatures F{kAsyncEpilogue, kDqBeforeDk, kDeferredDq};
  extern __shared__ unsigned char smem_raw[];
  __shared__ int ticket;
  const BlockTiles<F.deferred_dq> t(smem_raw, a.cu_seqlens);
  if constexpr (!F.deferred_dq) {
    for (int i = threadIdx.x; i < a.r; i += kThreads) t.cu_copy[i] = a.cu_seqlens[i];
  }
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
    for (int s = 0; s < BlockTiles<F.deferred_dq>::kDsBarriers; ++s) {
      tma::init(t.ds_ready + s, kConsumerWarps);
      tma::init(t.ds_free + s, kConsumerWarps);
    }
    tma::fence_init();
  }
  __syncthreads();  // the last block-wide barrier: the roles part here
  const int head = ticket / a.key_blocks, key_block = a.key_blocks - 1 - ticket % a.key_blocks;
  const int s0 = key_block * kKeys;
  if (threadIdx.x >= kConsumerThreads) {
    lower_registers<kProducerRegisters>();
    const int warp = (threadIdx.x - kConsumerThreads) / 32;
    if (threadIdx.x == kConsumerThreads) {  // K and V first: the block's set-up below (a search) runs under them
      tma::arrive_expect_tx(t.kv_full, 2 * kKeyTile);
      tma::load_head_rows(t.ks, kKeySlab, &a.k_map, head, s0, t.kv_full);
      tma::load_head_rows(t.vs, kKeySlab, &a.v_map, head, s0, t.kv_full);
    }
    const KeyBlock b(t.cu, a.r, s0, a.tokens, a.window);
    if (warp == 0) {
      load_query_tiles(a, t, b, head);
    } else if (warp <= kDqStages) {
      add_dq_tiles(a, t, b, head, key_block, warp - 1);
    }
    return;
  }
  raise_registers<kConsumerRegisters>();
  const KeyBlock b(t.cu, a.r, s0, a.tokens, a.window);
  if constexpr (F.deferred_dq) {
    consume_deferred<F.async_epilogue>(a, t, b, head);
  } else {
    consume<F.async_epilogue, F.dq_before_dk>(a, t, b, head);
  }
}

// dq += scale · dq_accum (kOverwrite: dq = scale · dq_accum, the bits of adding to zeros), rounded once; 4 elements
// per thread.
template <bool kOverwrite>
__global__ void add_scaled_dq_kernel(__nv_bfloat16* dq, const float* accum, int64_t quads, float scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= quads) return;
  const float4 g = reinterpret_cast<const float4*>(accum)[i];
  auto* cell = reinterpret_cast<__nv_bfloat162*>(dq) + 2 * i;
  float2 lo = make_float2(0.f, 0.f), hi = lo;
  if constexpr (!kOverwrite) {
    lo = __bfloat1622float2(cell[0]);
    hi = __bfloat1622float2(cell[1]);
  }
  cell[0] = __floats2bfloat162_rn(lo.x + scale * g.x, lo.y + scale * g.y);
  cell[1] = __floats2bfloat162_rn(hi.x + scale * g.z, hi.y + scale * g.w);
}

// The deferred_dq block does not depend on cu_seqlens' length; it must leave room for the kernel's static `ticket`
// within Hopper's 227 KB per block (set_smem_limit checks the device's figure at run time).
static_assert(smem_bytes<true>(0) + 64 <= 227 * 1024, "the deferred_dq block's shared memory");

// `writes`: without async_epilogue dq is overwritten natively and dk / dv by a zero fill first (the epilogue is a
// read-modify-write); with it all three natively.
template <BackwardFeatures F>
void launch_fused_backward(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk,
                           Tensor& dv, int64_t window, float scale, AttentionGradWrites writes) {
  if (!tma_aligned(q.raw()) || !tma_aligned(k.raw()) || !tma_aligned(v.raw()) || !tma_aligned(dy.raw()) ||
      !tma_aligned(dq.raw()) || !tma_aligned(dk.raw()) || !tma_aligned(dv.raw())) {
    zero_overwritten(writes, dq, dk, dv);  // the copy engine's limit: the fallback (added into the zeros)
    attention_backward_without_tma(dy, q, k, v, cu_seqlens, y, lse, dq, dk, dv, window, scale, {});
    return;
  }
  if constexpr (!F.async_epilogue) {
    zero_overwritten({.dk = writes.dk, .dv = writes.dv}, dq, dk, dv);
    writes.dk = writes.dv = GradWrite::add;
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
      scale * kLog2e,
      writes.dk == GradWrite::overwrite,
      writes.dv == GradWrite::overwrite};
  const size_t smem = smem_bytes<F.deferred_dq>(p.r);
  const auto kernel = attention_backward_fused_kernel<F.async_epilogue, F.dq_before_dk, F.deferred_dq>;
  set_smem_limit(kernel, smem, "attention_backward");
  const auto blocks = static_cast<unsigned>(key_blocks) * static_cast<unsigned>(p.heads);  // one per ticket
  kernel<<<blocks, kThreads, smem, stream>>>(args);
  GPT_CUDA_CHECK_LAUNCH();

  const int64_t quads = static_cast<int64_t>(accum_floats / 4);
  const auto add_dq = writes.dq == GradWrite::overwrite ? add_scaled_dq_kernel<true> : add_scaled_dq_kernel<false>;
  add_dq<<<static_cast<unsigned>((quads + 255) / 256), 256, 0, stream>>>(device_bf16(dq), raw, quads, scale);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace gpt::cuda
