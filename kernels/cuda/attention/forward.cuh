#pragma once
// The warp-specialised CUDA forward of kernels/attention.h (bf16, head dim 128): the fallback's tiles and per-tile
// steps (kernels/cuda/attention/forward_tiles.cuh) in a block with no block-wide barrier per tile, configured by
// ForwardOptions. attention/forward.cu instantiates the promoted configuration and the candidate; the kernel ladder
// (kernels/cuda/ladder/forward_tma.cu) instantiates the superseded ones. Everything here has internal linkage: each
// including file gets its own kernels.
//
// One block = 64 · consumers consecutive tokens × one head = `consumers` consumer warpgroups of 64 query rows + a
// producer (2 consumers: one producer warp; 3: a producer warpgroup whose registers move to the consumers with
// setmaxnreg).
//   - The producer's first thread loads Q and then every K/V tile with the tensor copy engine (TMA, 128-byte
//     swizzle = the wgmma layout) into a ring of kStages stages; each load completes on the stage's `full`
//     mbarrier, and a stage is refilled once every consumer warp has arrived on its `empty` mbarrier.
//   - Each consumer warpgroup walks the block's tiles on its own: per tile one burst of tensor-core work — S of
//     tile n and P·V of tile n − 1 — then the softmax of tile n while P·V of tile n − 1 still runs; O is rescaled
//     once that product has completed. With take_turns the warpgroups issue their bursts round robin (named
//     barriers 1 … consumers), otherwise whenever each is ready.
//   - Each warpgroup stages its output in its own rows of the Q tile (same swizzled layout) and stores 16-byte
//     chunks after a warpgroup barrier (one named barrier per warpgroup).
// persistent: one block per SM takes (query block, head) items from a ticket counter, heaviest first
// (forward_schedule_kernel sorts the query blocks by the key tiles they walk), with two Q tiles so that the producer
// loads the next item's Q and first K/V tiles while the consumers finish the current one; the K/V ring and the
// warpgroups' turns run on across items. lazy_rescale: the softmax raises its running max only when a score exceeds
// it by more than 2^8 (softmax_scores_lazy: most tiles skip the cross-thread max reduction and the O rescale).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/attention/common.cuh"
#include "kernels/cuda/attention/forward_tiles.cuh"
#include "kernels/cuda/attention/launch.h"
#include "kernels/cuda/attention/fallback.h"
#include "kernels/cuda/attention/wgmma_common.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/cuda/tma.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace gpt::cuda {

namespace {

using namespace attn;
using namespace attn::forward_tiles;

constexpr int kStages = 4;
constexpr int kTurnBarrier0 = 1;  // named barriers: turns 1 … kConsumers, then one per warpgroup for the store
constexpr uint32_t kKvTransferBytes = 2 * kKvBytes;  // a K tile and a V tile

// The features of one configuration of the kernel.
struct ForwardOptions {
  int consumers = 3;          // consumer warpgroups of 64 query rows per block (Shape)
  bool persistent = false;    // one block per SM taking items from a ticket counter, heaviest first
  bool lazy_rescale = false;  // softmax_scores_lazy instead of softmax_scores
  bool take_turns = false;    // warpgroups issue their bursts round robin (Turns), not whenever each is ready
};

// The block's shape for kConsumers warpgroups of 64 query rows. 2 consumers + one producer warp (288 × 224
// registers fit as they are); 3 consumers + a producer warpgroup that hands its registers to them (setmaxnreg:
// 3 × 128 × kConsumerRegisters + 128 × kProducerRegisters ≤ 65,536).
template <int kConsumers>
struct Shape {
  static constexpr int kRows = kConsumers * kWarpgroupRows;
  static constexpr int kQSlab = kRows * kRowBytes, kQTile = 2 * kQSlab;  // two 64-column slabs
  static constexpr int kConsumerThreadCount = 128 * kConsumers, kConsumerWarps = 4 * kConsumers;
  static constexpr bool kRebalance = kConsumers > 2;
  static constexpr int kThreads = kConsumerThreadCount + (kRebalance ? 128 : 32);
  static constexpr int kConsumerRegisters = 160, kProducerRegisters = 24;
  static constexpr int kStoreBarrier0 = kTurnBarrier0 + kConsumers;
  static_assert(kStoreBarrier0 + kConsumers <= 16, "named barrier ids");
  static_assert(!kRebalance || kConsumerThreadCount * kConsumerRegisters + 128 * kProducerRegisters <= 65536,
                "register file");
};

struct TmaForwardArgs {
  CUtensorMap q_map, k_map, v_map;  // kernels/cuda/tensor_map.h: Q boxes of the block's rows, K/V of 64
  ForwardProblem problem;
  int* schedule;  // persistent: [0] the ticket counter (zero at launch), [1 + i] the i-th heaviest query block
  int items;      // persistent: query blocks × heads
};

// Shared memory of one block per item: Q, kStages K tiles, kStages V tiles (1024-byte aligned for the swizzle), the
// barriers, cu_seqlens.
template <int kConsumers>
struct TmaBlockTiles {
  uint8_t *qs, *ks, *vs;
  uint64_t *q_full, *full, *empty;
  int* cu;
  __device__ explicit TmaBlockTiles(unsigned char* raw) {
    qs = align_1024(raw);
    ks = qs + Shape<kConsumers>::kQTile;
    vs = ks + kStages * kKvBytes;
    q_full = reinterpret_cast<uint64_t*>(vs + kStages * kKvBytes);
    full = q_full + 1;
    empty = full + kStages;
    cu = reinterpret_cast<int*>(empty + kStages);
  }
  __device__ uint32_t k_addr(int stage) const { return wgmma::smem_addr(ks + stage * kKvBytes); }
  __device__ uint32_t v_addr(int stage) const { return wgmma::smem_addr(vs + stage * kKvBytes); }
};
template <int kConsumers>
constexpr size_t smem_bytes(int r) {
  return 1024 + Shape<kConsumers>::kQTile + 2 * kStages * kKvBytes + (1 + 2 * kStages) * sizeof(uint64_t) +
         r * sizeof(int);
}

// Shared memory of the persistent block: two Q tiles (item i uses tile i % 2) with their full/empty barriers and the
// item each holds (first query, head; first query −1: no more items), then the K/V ring and cu_seqlens.
struct ItemSlot {
  int q0, head;
};
template <int kConsumers>
struct PersistentTiles {
  uint8_t *q_tiles, *ks, *vs;
  uint64_t *q_full, *q_empty, *full, *empty;
  ItemSlot* slot;
  int* cu;
  __device__ explicit PersistentTiles(unsigned char* raw) {
    q_tiles = align_1024(raw);
    ks = q_tiles + 2 * Shape<kConsumers>::kQTile;
    vs = ks + kStages * kKvBytes;
    q_full = reinterpret_cast<uint64_t*>(vs + kStages * kKvBytes);
    q_empty = q_full + 2;
    full = q_empty + 2;
    empty = full + kStages;
    slot = reinterpret_cast<ItemSlot*>(empty + kStages);
    cu = reinterpret_cast<int*>(slot + 2);
  }
  __device__ uint8_t* qs(int b) const { return q_tiles + b * Shape<kConsumers>::kQTile; }
  __device__ uint32_t k_addr(int stage) const { return wgmma::smem_addr(ks + stage * kKvBytes); }
  __device__ uint32_t v_addr(int stage) const { return wgmma::smem_addr(vs + stage * kKvBytes); }
};
template <int kConsumers>
constexpr size_t persistent_smem_bytes(int r) {
  return 1024 + 2 * Shape<kConsumers>::kQTile + 2 * kStages * kKvBytes + (4 + 2 * kStages) * sizeof(uint64_t) +
         2 * sizeof(ItemSlot) + r * sizeof(int);
}

// Loads K/V tiles [0, tiles) from key_begin into the ring, the block's g-th tile overall into stage g % kStages
// once its previous use has been released.
template <typename Tiles>
__device__ void produce_tiles(const TmaForwardArgs& a, const Tiles& t, int head, int key_begin, int tiles, int g0) {
  for (int n = 0; n < tiles; ++n) {
    const int g = g0 + n, stage = g % kStages, use = g / kStages, k0 = key_begin + n * kBlockK;
    if (use > 0) tma::wait(t.empty + stage, (use - 1) & 1);
    tma::arrive_expect_tx(t.full + stage, kKvTransferBytes);
    tma::load_head_rows(t.ks + stage * kKvBytes, kKvSlabBytes, &a.k_map, head, k0, t.full + stage);
    tma::load_head_rows(t.vs + stage * kKvBytes, kKvSlabBytes, &a.v_map, head, k0, t.full + stage);
  }
}

// The producer of one block per item: Q, then the block's tiles.
template <int kConsumers>
__device__ void produce(const TmaForwardArgs& a, const TmaBlockTiles<kConsumers>& t, int q0, int key_begin, int tiles) {
  using S = Shape<kConsumers>;
  const int head = blockIdx.y;
  tma::arrive_expect_tx(t.q_full, S::kQTile);
  tma::load_head_rows(t.qs, S::kQSlab, &a.q_map, head, q0, t.q_full);
  produce_tiles(a, t, head, key_begin, tiles, 0);
}

// The persistent producer: per item a ticket (the next one fetched while this one loads), its Q into tile i % 2 once
// the consumers have released that tile's item i − 2, then its K/V tiles.
template <int kConsumers>
__device__ void produce_items(const TmaForwardArgs& a, const PersistentTiles<kConsumers>& t) {
  using S = Shape<kConsumers>;
  int ticket = atomicAdd(a.schedule, 1), g = 0;
  for (int i = 0;; ++i) {
    const int b = i & 1;
    if (i >= 2) tma::wait(t.q_empty + b, ((i >> 1) - 1) & 1);
    if (ticket >= a.items) {
      t.slot[b] = {-1, 0};
      tma::arrive(t.q_full + b);
      return;
    }
    const int q0 = a.schedule[1 + ticket / a.problem.heads] * S::kRows, head = ticket % a.problem.heads;
    ticket = atomicAdd(a.schedule, 1);
    t.slot[b] = {q0, head};  // published by the arrival below (release), read after the consumers' wait (acquire)
    tma::arrive_expect_tx(t.q_full + b, S::kQTile);
    tma::load_head_rows(t.qs(b), S::kQSlab, &a.q_map, head, q0, t.q_full + b);
    const BlockKeys keys = block_keys<kBlockK>(t.cu, a.problem.r, q0, S::kRows, a.problem.tokens, a.problem.window);
    produce_tiles(a, t, head, keys.key_begin, keys.tiles, g);
    g += keys.tiles;
  }
}

// Round-robin bursts: warpgroup w issues its n-th burst after warpgroup w − 1 issued its n-th (w = 0: after the last
// warpgroup issued its (n − 1)-th). Every warpgroup issues the same number of bursts; the last warpgroup starts the
// round. With a known total (one block per item: tiles + 1) it leaves out its final arrival, so that every arrival
// meets a sync; the persistent block (total INT_MAX) instead has warpgroup 0 meet that arrival at the end
// (finish). kEnabled = false (no take_turns): no order at all, every call a no-op.
template <int kConsumers, bool kEnabled = true>
struct Turns {
  int wg, bursts, issued = 0;
  __device__ Turns(int warpgroup, int total) : wg(warpgroup), bursts(total) {
    if (kEnabled && wg == kConsumers - 1) tma::named_arrive(kTurnBarrier0, 2 * 128);
  }
  __device__ void begin() const {
    if constexpr (kEnabled) tma::named_sync(kTurnBarrier0 + wg, 2 * 128);
  }
  __device__ void end() {
    if constexpr (kEnabled) {
      ++issued;
      const int next = (wg + 1) % kConsumers;
      if (next != 0 || issued < bursts) tma::named_arrive(kTurnBarrier0 + next, 2 * 128);
    }
  }
  __device__ void finish() const {
    if (wg == 0) begin();
  }
};

// The start both kernels share: cu_seqlens into shared memory, and (thread 0) the K/V ring's barriers plus those
// `init_q` sets up; the block barrier that follows is the caller's.
template <int kConsumers, typename Tiles, typename InitQ>
__device__ __forceinline__ void init_block(const TmaForwardArgs& a, const Tiles& t, InitQ init_q) {
  using S = Shape<kConsumers>;
  for (int i = threadIdx.x; i < a.problem.r; i += S::kThreads) t.cu[i] = a.problem.cu_seqlens[i];
  if (threadIdx.x == 0) {
    init_q();
    for (int s = 0; s < kStages; ++s) {
      tma::init(t.full + s, 1);
      tma::init(t.empty + s, S::kConsumerWarps);
    }
    tma::fence_init();
  }
}

// Stage `stage` may be refilled as far as this warp is concerned (its products reading it have completed).
__device__ __forceinline__ void release(uint64_t* empty) {
  if ((threadIdx.x & 31) == 0) tma::arrive(empty);
}

// Normalises O, writes the warpgroup's 64 rows into its own rows of the Q tile `qs` (swizzled as Q: the other
// warpgroups may still be reading their Q rows), then stores 16-byte chunks; lse per row.
template <int kConsumers>
__device__ void store_output(const float (&o)[kHeadDim / 2], const RowState& rows, uint8_t* qs, int q0, int head,
                             const TmaForwardArgs& a) {
  using S = Shape<kConsumers>;
  const int wg = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, c = lane & 3;
  float inv[2];
  finish_rows(rows, a.problem.tokens, head, a.problem.lse, inv);
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    const int local = wg * kWarpgroupRows + warp * 16 + g + 8 * row;  // row of the block's Q tile
#pragma unroll
    for (int nt = 0; nt < kHeadDim / 8; ++nt) {
      uint8_t* slab = qs + (nt / 8) * S::kQSlab;
      *reinterpret_cast<__nv_bfloat162*>(slab + wgmma::swizzled_offset(local, nt % 8) + 4 * c) =
          __floats2bfloat162_rn(o[4 * nt + 2 * row] * inv[row], o[4 * nt + 2 * row + 1] * inv[row]);
    }
  }
  tma::named_sync(S::kStoreBarrier0 + wg, 128);
  constexpr int kChunks = kHeadDim / 8;
#pragma unroll
  for (int j = 0; j < kWarpgroupRows * kChunks / 128; ++j) {
    const int i = threadIdx.x % 128 + j * 128, rr = wg * kWarpgroupRows + i / kChunks, chunk = i % kChunks;
    const int t = q0 + rr;
    if (t < a.problem.tokens) {
      const uint8_t* src = qs + (chunk / 8) * S::kQSlab + wgmma::swizzled_offset(rr, chunk % 8);
      *reinterpret_cast<uint4*>(a.problem.y + (static_cast<int64_t>(t) * a.problem.heads + head) * kHeadDim +
                                chunk * 8) = *reinterpret_cast<const uint4*>(src);
    }
  }
}

// One tile's softmax (kernels/cuda/attention/forward_tiles.cuh); returns whether O must be rescaled.
template <bool kLazyRescale>
__device__ __forceinline__ bool softmax_tile(float (&s)[kBlockK / 2], TileKind kind, int k0, RowState& rows,
                                             float scale_log2, float (&rescale)[2]) {
  if constexpr (kLazyRescale) {
    return softmax_scores_lazy(s, kind, k0, rows, scale_log2, rescale);
  } else {
    softmax_scores(s, kind, k0, rows, scale_log2, rescale);
    return true;
  }
}

// The rest of a burst without scores: P·V of the previous tile when it had values, issued inside the warpgroup's
// turn and waited for.
template <typename WarpgroupTurns>
__device__ __forceinline__ void values_burst(float (&o)[kHeadDim / 2], const uint32_t (&pa)[kBlockK / 16][4],
                                             uint32_t v_addr, bool values, WarpgroupTurns& turns) {
  if (values) {
    issue_pv(o, pa, v_addr);
    turns.end();
    wgmma::wait<0>();
    wgmma::fence_operands(o);
  } else {
    turns.end();
  }
}

// One consumer warpgroup's walk over one item's tiles, the block's g0-th tile overall first; O accumulates
// unnormalised. kReleaseLast: the last tile's stage is released too (persistent: the ring runs on into the next
// item).
template <int kConsumers, bool kReleaseLast, ForwardOptions kOptions, typename Tiles>
__device__ void consume_tiles(const TmaForwardArgs& a, const Tiles& t, uint32_t q_addr, RowState& rows, int key_begin,
                              int tiles, int g0, Turns<kConsumers, kOptions.take_turns>& turns,
                              float (&o)[kHeadDim / 2]) {
  constexpr uint32_t kQSlab = Shape<kConsumers>::kQSlab;
  float s[kBlockK / 2], p[kBlockK / 2];  // scores (wgmma accumulators), probabilities
  uint32_t pa[kBlockK / 16][4];
  float rescale[2];

  // Burst 0: S of tile 0.
  tma::wait(t.full + g0 % kStages, (g0 / kStages) & 1);
  TileKind prev = rows.classify_tile(key_begin);
  turns.begin();
  if (prev != TileKind::skip) {
    issue_scores(s, q_addr, t.k_addr(g0 % kStages), kQSlab);
    turns.end();
    wgmma::wait<0>();
    wgmma::fence_operands(s);
    softmax_tile<kOptions.lazy_rescale>(s, prev, key_begin, rows, a.problem.scale_log2, rescale);
    pack_fragments(s, pa);  // O is still zero: nothing to rescale
  } else {
    turns.end();
  }

  // Burst n: S of tile n and P·V of tile n − 1.
  for (int n = 1; n < tiles; ++n) {
    const int stage = (g0 + n) % kStages, prev_stage = (g0 + n - 1) % kStages, k0 = key_begin + n * kBlockK;
    tma::wait(t.full + stage, ((g0 + n) / kStages) & 1);
    const TileKind kind = rows.classify_tile(k0);
    const bool scores = kind != TileKind::skip, values = prev != TileKind::skip;
    bool rescale_o = false;
    // Each case issues, waits and reads on its own path: with the issues behind separate conditions the compiler
    // cannot tell which commit group wait<1> retires and serialises every wgmma.
    turns.begin();
    if (scores && values) {
      issue_scores(s, q_addr, t.k_addr(stage), kQSlab);
      issue_pv(o, pa, t.v_addr(prev_stage));
      turns.end();
      wgmma::wait<1>();  // S (committed first) has completed; P·V may still run
      wgmma::fence_operands(s);
      for (int i = 0; i < kBlockK / 2; ++i) p[i] = s[i];  // the softmax works on its own registers, not S's
      rescale_o = softmax_tile<kOptions.lazy_rescale>(p, kind, k0, rows, a.problem.scale_log2, rescale);
      wgmma::wait<0>();
      wgmma::fence_operands(o);
    } else if (scores) {
      issue_scores(s, q_addr, t.k_addr(stage), kQSlab);
      turns.end();
      wgmma::wait<0>();
      wgmma::fence_operands(s);
      for (int i = 0; i < kBlockK / 2; ++i) p[i] = s[i];
      rescale_o = softmax_tile<kOptions.lazy_rescale>(p, kind, k0, rows, a.problem.scale_log2, rescale);
    } else {
      values_burst(o, pa, t.v_addr(prev_stage), values, turns);
    }
    release(t.empty + prev_stage);  // K of tile n − 1 was read in burst n − 1, V in this one
    if (scores) {
      if (rescale_o) rescale_output(o, rescale);
      pack_fragments(p, pa);
    }
    prev = kind;
  }

  // Last burst: P·V of the last tile.
  const int last_stage = (g0 + tiles - 1) % kStages;
  turns.begin();
  values_burst(o, pa, t.v_addr(last_stage), prev != TileKind::skip, turns);
  if constexpr (kReleaseLast) release(t.empty + last_stage);
}

// One block per item: a consumer warpgroup's walk over the block's tiles, then its output.
template <int kConsumers, ForwardOptions kOptions>
__device__ void consume(const TmaForwardArgs& a, const TmaBlockTiles<kConsumers>& t, int q0, int key_begin, int tiles) {
  const int wg = threadIdx.x / 128;
  RowState rows(t.cu, a.problem.r, q0, a.problem.tokens, a.problem.window);
  const uint32_t q_addr = wgmma::smem_addr(t.qs) + wg * kWarpgroupRows * kRowBytes;
  Turns<kConsumers, kOptions.take_turns> turns(wg, tiles + 1);
  float o[kHeadDim / 2] = {};
  tma::wait(t.q_full, 0);
  consume_tiles<kConsumers, false, kOptions>(a, t, q_addr, rows, key_begin, tiles, 0, turns, o);
  store_output<kConsumers>(o, rows, t.qs, q0, blockIdx.y, a);
}

// Persistent: the items the producer hands out, until it publishes the end; Q tile i % 2 is released per warp once
// the warp's output has been read back out of it.
template <int kConsumers, ForwardOptions kOptions>
__device__ void consume_items(const TmaForwardArgs& a, const PersistentTiles<kConsumers>& t) {
  using S = Shape<kConsumers>;
  const int wg = threadIdx.x / 128;
  Turns<kConsumers, kOptions.take_turns> turns(wg, INT_MAX);
  int g = 0;
  for (int i = 0;; ++i) {
    const int b = i & 1;
    tma::wait(t.q_full + b, (i >> 1) & 1);
    const ItemSlot item = t.slot[b];
    if (item.q0 < 0) break;
    const BlockKeys keys =
        block_keys<kBlockK>(t.cu, a.problem.r, item.q0, S::kRows, a.problem.tokens, a.problem.window);
    RowState rows(t.cu, a.problem.r, item.q0, a.problem.tokens, a.problem.window);
    const uint32_t q_addr = wgmma::smem_addr(t.qs(b)) + wg * kWarpgroupRows * kRowBytes;
    float o[kHeadDim / 2] = {};
    consume_tiles<kConsumers, true, kOptions>(a, t, q_addr, rows, keys.key_begin, keys.tiles, g, turns, o);
    g += keys.tiles;
    store_output<kConsumers>(o, rows, t.qs(b), item.q0, item.head, a);
    __syncwarp();
    release(t.q_empty + b);
  }
  turns.finish();
}

// One kernel for every configuration; the options come as separate template arguments because nvcc's launch stubs
// cannot spell a class-type template argument.
template <int kConsumers, bool kPersistent, bool kLazyRescale, bool kTakeTurns>
__global__ void __launch_bounds__(Shape<kConsumers>::kThreads, 1)
    attention_forward_kernel(const __grid_constant__ TmaForwardArgs a) {
  constexpr ForwardOptions kOptions{kConsumers, kPersistent, kLazyRescale, kTakeTurns};
  using S = Shape<kConsumers>;
  extern __shared__ unsigned char smem_raw[];
  if constexpr (kPersistent) {
    static_assert(S::kRebalance, "the persistent block has a producer warpgroup");
    const PersistentTiles<kConsumers> t(smem_raw);
    init_block<kConsumers>(a, t, [&] {
      for (int b = 0; b < 2; ++b) {
        tma::init(t.q_full + b, 1);
        tma::init(t.q_empty + b, S::kConsumerWarps);
      }
    });
    __syncthreads();  // the last block-wide barrier: the roles part here
    if (threadIdx.x >= S::kConsumerThreadCount) {
      lower_registers<S::kProducerRegisters>();
      if (threadIdx.x == S::kConsumerThreadCount) produce_items(a, t);
      return;
    }
    raise_registers<S::kConsumerRegisters>();
    consume_items<kConsumers, kOptions>(a, t);
  } else {
    const TmaBlockTiles<kConsumers> t(smem_raw);
    const int q0 = blockIdx.x * S::kRows;
    init_block<kConsumers>(a, t, [&] { tma::init(t.q_full, 1); });
    __syncthreads();  // the last block-wide barrier: the roles part here
    const BlockKeys keys = block_keys<kBlockK>(t.cu, a.problem.r, q0, S::kRows, a.problem.tokens, a.problem.window);
    if (threadIdx.x >= S::kConsumerThreadCount) {
      if constexpr (S::kRebalance) lower_registers<S::kProducerRegisters>();
      if (threadIdx.x == S::kConsumerThreadCount) produce(a, t, q0, keys.key_begin, keys.tiles);
      return;
    }
    if constexpr (S::kRebalance) raise_registers<S::kConsumerRegisters>();
    consume<kConsumers, kOptions>(a, t, q0, keys.key_begin, keys.tiles);
  }
}

// Heaviest-first order of the query blocks of `rows` queries: schedule[0] = 0 (the persistent block's ticket
// counter), schedule[1 + i] = the query block with the i-th most key tiles to walk (block_keys; ties in any order,
// counts of kScheduleBins − 1 or more share the top bin). One block; the order only spreads the work, every item's
// result is the same.
constexpr int kScheduleThreads = 1024, kScheduleBins = 1024;
__global__ void __launch_bounds__(kScheduleThreads)
    forward_schedule_kernel(const int* cu_seqlens, int r, int tokens, int window, int rows, int q_blocks,
                            int* schedule) {
  extern __shared__ int cu[];
  __shared__ int bins[kScheduleBins];
  for (int i = threadIdx.x; i < r; i += kScheduleThreads) cu[i] = cu_seqlens[i];
  for (int i = threadIdx.x; i < kScheduleBins; i += kScheduleThreads) bins[i] = 0;
  __syncthreads();
  const auto bin_of = [&](int block) {
    return min_int(block_keys<kBlockK>(cu, r, block * rows, rows, tokens, window).tiles, kScheduleBins - 1);
  };
  for (int b = threadIdx.x; b < q_blocks; b += kScheduleThreads) atomicAdd(&bins[bin_of(b)], 1);
  __syncthreads();
  if (threadIdx.x == 0) {  // bins → first position of each, largest counts first
    int position = 0;
    for (int i = kScheduleBins - 1; i >= 0; --i) {
      const int count = bins[i];
      bins[i] = position;
      position += count;
    }
    schedule[0] = 0;
  }
  __syncthreads();
  for (int b = threadIdx.x; b < q_blocks; b += kScheduleThreads) schedule[1 + atomicAdd(&bins[bin_of(b)], 1)] = b;
}

template <int kConsumers>
TmaForwardArgs forward_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                            Tensor& lse, const AttentionProblem& p, int64_t window, float scale) {
  using S = Shape<kConsumers>;
  return {head_rows_tensor_map(device_bf16(q), p.tokens, p.heads, S::kRows, "attention_forward q"),
          head_rows_tensor_map(device_bf16(k), p.tokens, p.heads, kBlockK, "attention_forward k"),
          head_rows_tensor_map(device_bf16(v), p.tokens, p.heads, kBlockK, "attention_forward v"),
          forward_problem(cu_seqlens, y, lse, p, window, scale),
          nullptr,
          0};
}

// What the copy engine cannot take (misaligned bases) and non-positive scales go to the fallback
// (attention/fallback.h).
bool tma_forward_applies(const Tensor& q, const Tensor& k, const Tensor& v, float scale) {
  return scale > 0.f && tma_aligned(q.raw()) && tma_aligned(k.raw()) && tma_aligned(v.raw());
}

template <ForwardOptions kOptions>
void launch_tma_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                        Tensor& lse, int64_t window, float scale) {
  constexpr int kConsumers = kOptions.consumers;
  using S = Shape<kConsumers>;
  if (!tma_forward_applies(q, k, v, scale)) {
    attention_forward_without_tma(q, k, v, cu_seqlens, y, lse, window, scale);
    return;
  }
  const AttentionProblem p = attention_problem(q, cu_seqlens, "attention_forward");
  if (p.tokens == 0) return;
  const size_t smem = smem_bytes<kConsumers>(p.r);
  const auto kernel =
      attention_forward_kernel<kConsumers, kOptions.persistent, kOptions.lazy_rescale, kOptions.take_turns>;
  set_smem_limit(kernel, smem, "attention_forward");
  const TmaForwardArgs args = forward_args<kConsumers>(q, k, v, cu_seqlens, y, lse, p, window, scale);
  const dim3 grid(static_cast<unsigned>((p.tokens + S::kRows - 1) / S::kRows), static_cast<unsigned>(p.heads));
  kernel<<<grid, S::kThreads, smem, current_stream()>>>(args);
  GPT_CUDA_CHECK_LAUNCH();
}

template <ForwardOptions kOptions>
void launch_persistent_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                               Tensor& lse, int64_t window, float scale) {
  constexpr int kConsumers = kOptions.consumers;
  using S = Shape<kConsumers>;
  const AttentionProblem p = attention_problem(q, cu_seqlens, "attention_forward");
  const size_t smem = persistent_smem_bytes<kConsumers>(p.r);
  // Two Q tiles leave room for fewer cu_seqlens entries than one block per item takes: more go to that block.
  if (!tma_forward_applies(q, k, v, scale) || smem > device_properties().sharedMemPerBlockOptin) {
    constexpr ForwardOptions kOnePerItem{kOptions.consumers, false, kOptions.lazy_rescale, kOptions.take_turns};
    launch_tma_forward<kOnePerItem>(q, k, v, cu_seqlens, y, lse, window, scale);
    return;
  }
  if (p.tokens == 0) return;
  const cudaStream_t stream = current_stream();
  const int q_blocks = static_cast<int>((p.tokens + S::kRows - 1) / S::kRows);
  auto* raw = static_cast<float*>(stream_ordered_alloc((1 + static_cast<size_t>(q_blocks)) * sizeof(int), stream));
  const AttentionScratch scratch(raw, StreamFree{stream});
  TmaForwardArgs args = forward_args<kConsumers>(q, k, v, cu_seqlens, y, lse, p, window, scale);
  args.schedule = reinterpret_cast<int*>(raw);
  args.items = q_blocks * p.heads;
  forward_schedule_kernel<<<1, kScheduleThreads, p.r * sizeof(int), stream>>>(
      args.problem.cu_seqlens, p.r, args.problem.tokens, args.problem.window, S::kRows, q_blocks, args.schedule);
  GPT_CUDA_CHECK_LAUNCH();
  const auto kernel =
      attention_forward_kernel<kConsumers, kOptions.persistent, kOptions.lazy_rescale, kOptions.take_turns>;
  set_smem_limit(kernel, smem, "attention_forward");
  const auto blocks = static_cast<unsigned>(std::min(multiprocessor_count(), args.items));
  kernel<<<blocks, S::kThreads, smem, stream>>>(args);
  GPT_CUDA_CHECK_LAUNCH();
}

// The forward of one configuration: the persistent block or one block per item.
template <ForwardOptions kOptions>
void launch_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y, Tensor& lse,
                    int64_t window, float scale) {
  if constexpr (kOptions.persistent) {
    launch_persistent_forward<kOptions>(q, k, v, cu_seqlens, y, lse, window, scale);
  } else {
    launch_tma_forward<kOptions>(q, k, v, cu_seqlens, y, lse, window, scale);
  }
}

}  // namespace
}  // namespace gpt::cuda
