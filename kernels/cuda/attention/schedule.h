#pragma once
// Index arithmetic of the CUDA attention kernels that does not touch data: which keys a query may attend
// (cu_seqlens segments and the sliding window), which key tiles a forward block walks and how they meet its rows,
// and how backward v4/v5 split the work into key blocks and query tiles. Plain C++ with host-device qualifiers under
// nvcc, so that the CPU tests can check the invariants the kernels rely on
// (tests/attention/attention_schedule_test.cpp) on the same code the GPU runs.
#include <cstdint>

#if defined(__CUDACC__)
#define GPT_ATTN_HD __host__ __device__ __forceinline__
#else
#define GPT_ATTN_HD inline
#endif

namespace gpt::cuda::attn {

GPT_ATTN_HD int min_int(int a, int b) {
#if defined(__CUDA_ARCH__)
  return min(a, b);
#else
  return a < b ? a : b;
#endif
}

// Index of the segment that holds token t: the last i with cu[i] ≤ t (empty segments repeat values, so the last
// one is the segment that really contains t). `cu` has r entries (in shared memory on the GPU).
GPT_ATTN_HD int segment_index(const int* cu, int r, int64_t t) {
  int lo = 0, hi = r - 1;  // invariant: cu[lo] ≤ t < cu[hi] (cu[r-1] = T > t)
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (cu[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// The same for a token t at or after the first token of segment `from`, by walking forward from it: one read
// when t lies in the same segment (rows of one warpgroup almost always do), instead of a search of log2 r reads.
GPT_ATTN_HD int segment_index_from(const int* cu, int from, int64_t t) {
  int i = from;
  while (cu[i + 1] <= t) ++i;  // stops at the last entry ≤ t: cu[r-1] = T > t
  return i;
}

// First token of the segment that holds token t.
GPT_ATTN_HD int segment_begin(const int* cu, int r, int64_t t) { return cu[segment_index(cu, r, t)]; }

// One past the last token of the segment that holds token t.
GPT_ATTN_HD int segment_end(const int* cu, int r, int64_t t) { return cu[segment_index(cu, r, t) + 1]; }

// Lowest key a query t may attend: max(segment start, t − window).
GPT_ATTN_HD int64_t first_key(const int* cu, int r, int64_t t, int64_t window) {
  const int64_t b = segment_begin(cu, r, t);
  return b > t - window ? b : t - window;
}
// The same for t at or after the first token of segment `from` (segment_index_from).
GPT_ATTN_HD int64_t first_key_from(const int* cu, int from, int64_t t, int64_t window) {
  const int64_t b = cu[segment_index_from(cu, from, t)];
  return b > t - window ? b : t - window;
}

// How a tile of keys meets a tile of queries: no pair allowed, every pair allowed, or masks needed.
enum class TileKind { skip, full, masked };

// How a tile of kTile keys [k0, k0 + kTile) meets rows [t_first, t_last] whose first allowed keys run from lo_first
// to lo_last (first_key is non-decreasing in t): no pair allowed, every pair allowed, or masks needed. An empty row
// range (t_last < t_first: rows wholly past the end) is skipped.
template <int kTile>
GPT_ATTN_HD TileKind classify_keys(int k0, int t_first, int t_last, int lo_first, int lo_last) {
  const int k_last = k0 + kTile - 1;
  if (t_last < t_first || k0 > t_last || k_last < lo_first) return TileKind::skip;
  if (k_last <= t_first && k0 >= lo_last) return TileKind::full;
  return TileKind::masked;
}

// The keys a forward block of queries [q0, q0 + rows) walks: from the first key its first query may see, in tiles
// of kTile, to its last query (kv_end: one past it).
struct BlockKeys {
  int key_begin, kv_end, tiles;
};
template <int kTile>
GPT_ATTN_HD BlockKeys block_keys(const int* cu, int r, int q0, int rows, int tokens, int window) {
  const int q_last = min_int(q0 + rows, tokens) - 1;
  const int key_begin = static_cast<int>(first_key(cu, r, q0, window));
  return {key_begin, q_last + 1, (q_last - key_begin) / kTile + 1};
}

// Backward v4/v5: a block of kKeys keys [s0, s_last] (warpgroups of kHalf keys) and the query tiles of kQueries
// that can see them, [s0, q_end]. Key blocks and query tiles are aligned to their sizes.
template <int kKeys, int kQueries, int kHalf>
struct BackwardKeyBlock {
  static_assert(kKeys == 2 * kHalf && kKeys % kQueries == 0, "two halves; query tiles split key blocks evenly");
  int s0, s_last, q_end, tiles;

  GPT_ATTN_HD BackwardKeyBlock(const int* cu, int r, int first, int tokens, int window) : s0(first) {
    s_last = min_int(s0 + kKeys, tokens) - 1;
    // Queries that see a key s: [s, min(segment end − 1, s + window)]; the union ends at s_last's bound.
    const int seg_last = segment_end(cu, r, s_last) - 1;
    q_end = s_last + min_int(seg_last - s_last, window);  // no int overflow near T = 2^31
    tiles = (q_end - s0) / kQueries + 1;
  }
  // Whether half w's keys can meet the tile of queries [q0, q0 + kQueries) whose first query's window starts at
  // lo_first (first_key is non-decreasing, so that is the tile's lowest allowed key).
  GPT_ATTN_HD bool meets(int w, int q0, int tokens, int lo_first) const {
    const int k0 = s0 + kHalf * w;
    if (k0 >= tokens) return false;
    return k0 <= min_int(q0 + kQueries - 1, q_end) && min_int(k0 + kHalf - 1, tokens - 1) >= lo_first;
  }
  // How half w's keys meet the tile; lo[i] is the first allowed key of the tile's query i (queries past q_end:
  // `tokens`, they see nothing).
  GPT_ATTN_HD TileKind classify(int w, int q0, int tokens, const int* lo) const {
    if (!meets(w, q0, tokens, lo[0])) return TileKind::skip;
    const int k0 = s0 + kHalf * w;
    if (k0 + kHalf <= tokens && q0 >= k0 + kHalf - 1 && q0 + kQueries - 1 <= q_end && lo[kQueries - 1] <= k0) {
      return TileKind::full;  // every query is at or after every key and its window reaches the first key
    }
    return TileKind::masked;
  }
  // Whether the block adds to the tile's dQ: some key of it can be seen by some query of the tile. The key blocks
  // that do form a contiguous range ending at the block of the tile's last query, which fixes each one's rank.
  GPT_ATTN_HD bool contributes(int q0, int tokens, int lo_first) const {
    return meets(0, q0, tokens, lo_first) || meets(1, q0, tokens, lo_first);
  }
  // The number of key blocks after `key_block` that add to the tile at q0 before it (0: it stores the tile).
  GPT_ATTN_HD static int dq_rank(int q0, int tokens, int key_block) {
    return (min_int(q0 + kQueries, tokens) - 1) / kKeys - key_block;
  }
};

// A ring of kSize buffers handed between warps through mbarriers (kernels/cuda/tma.cuh: a barrier's m-th phase is
// waited for with parity m % 2). Use k (k = 0, 1, …) takes buffer k % kSize; whoever fills it first waits, when
// k ≥ kSize, for the release of use k − kSize; whoever reads it waits for the fill of use k. The fused backward's
// query-tile stages, dQ staging tiles and (v7) dSᵀ tiles are such rings (v7's protocol is checked for deadlocks on
// the CPU by tests/attention/deferred_dq_protocol_test.cpp).
template <int kSize>
struct BarrierRing {
  GPT_ATTN_HD static int slot(int k) { return k % kSize; }
  GPT_ATTN_HD static bool refills(int k) { return k >= kSize; }
  GPT_ATTN_HD static uint32_t filled_parity(int k) { return static_cast<uint32_t>(k / kSize) & 1; }
  GPT_ATTN_HD static uint32_t released_parity(int k) { return static_cast<uint32_t>(k / kSize - 1) & 1; }
};

}  // namespace gpt::cuda::attn
