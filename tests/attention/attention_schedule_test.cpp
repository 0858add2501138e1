// The index arithmetic of the CUDA attention kernels (kernels/cuda/attention/schedule.h), checked on the CPU
// against brute force over segment layouts and windows: the segment lookups, the forward's key walk and tile
// kinds (skip / full / masked) and per-element masks, and the invariants backward v4/v5's
// deterministic dQ relies on — a key block's tile loop covers every query that sees its keys, a skipped half has no
// allowed pair and a full one has only allowed pairs, the key blocks that add to a query tile are a contiguous
// range whose ranks are 0 … n − 1 from the diagonal block down (so every block waits only on blocks launched before
// it, and rank 0 stores every row of the tile).
#include "kernels/cuda/attention/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace gpt::cuda::attn {
namespace {

constexpr int kKeys = 128, kQueries = 64, kHalf = 64;  // backward v4/v5's block, tile and warpgroup sizes
using KeyBlock = BackwardKeyBlock<kKeys, kQueries, kHalf>;

struct Layout {
  std::vector<int> cu;  // cu_seqlens, last entry = T
  int window;
  int tokens() const { return cu.back(); }
  std::string describe() const {
    std::ostringstream os;
    os << "window " << window << ", cu_seqlens {";
    for (size_t i = 0; i < cu.size(); ++i) os << (i ? ", " : "") << cu[i];
    os << "}";
    return os.str();
  }
};

// The attention mask by definition: query t sees key s of its own segment with t − window ≤ s ≤ t.
int naive_segment_begin(const Layout& l, int t) {
  int begin = 0;
  for (int c : l.cu) {
    if (c <= t) begin = c;
  }
  return begin;
}
int naive_segment_end(const Layout& l, int t) {
  for (int c : l.cu) {
    if (c > t) return c;
  }
  return l.tokens();
}
bool allowed(const Layout& l, int t, int s) { return s <= t && s >= naive_segment_begin(l, t) && s >= t - l.window; }

// Random layouts: empty segments (repeated entries), single-token segments, segments longer than a key block, and
// windows around the tile sizes.
std::vector<Layout> layouts() {
  std::vector<Layout> out = {
      {{0, 1}, 0},
      {{0, 64}, 64},
      {{0, 128, 128, 256}, 127},
      {{0, 1, 2, 3, 200, 201, 700}, 129},
      {{0, 0, 63, 64, 65, 191, 192, 193, 500}, 640},
      {{0, 700}, 700},
  };
  std::mt19937 rng(20261204);
  const int windows[] = {0, 1, 63, 64, 65, 127, 128, 129, 200, 640, 1408};
  for (int n = 0; n < 120; ++n) {
    Layout l;
    l.cu = {0};
    const int tokens = std::uniform_int_distribution<int>(1, 700)(rng);
    while (l.cu.back() < tokens) {
      const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
      const int length = kind == 0 ? 0 : kind == 1 ? 1 : std::uniform_int_distribution<int>(2, 400)(rng);
      l.cu.push_back(std::min(tokens, l.cu.back() + length));
    }
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) l.cu.push_back(tokens);  // a trailing empty segment
    l.window = windows[std::uniform_int_distribution<int>(0, std::size(windows) - 1)(rng)];
    out.push_back(l);
  }
  return out;
}

TEST(AttentionSchedule, SegmentLookupsMatchTheirDefinition) {
  for (const Layout& l : layouts()) {
    SCOPED_TRACE(l.describe());
    const int r = static_cast<int>(l.cu.size());
    for (int t = 0; t < l.tokens(); ++t) {
      ASSERT_EQ(segment_begin(l.cu.data(), r, t), naive_segment_begin(l, t)) << "token " << t;
      ASSERT_EQ(segment_end(l.cu.data(), r, t), naive_segment_end(l, t)) << "token " << t;
      ASSERT_EQ(first_key(l.cu.data(), r, t, l.window), std::max(naive_segment_begin(l, t), t - l.window));
    }
  }
}

// The forward walk from a row's segment (RowState): from the segment of any earlier token t0, t's segment and first
// key come out as the search finds them, also across empty segments and several boundaries.
TEST(AttentionSchedule, SegmentWalkFromAnEarlierTokenMatchesTheSearch) {
  for (const Layout& l : layouts()) {
    SCOPED_TRACE(l.describe());
    const int r = static_cast<int>(l.cu.size());
    for (int t0 = 0; t0 < l.tokens(); t0 += 7) {
      const int from = segment_index(l.cu.data(), r, t0);
      ASSERT_EQ(l.cu[from], naive_segment_begin(l, t0)) << "token " << t0;
      for (int t = t0; t < std::min(l.tokens(), t0 + 200); ++t) {
        ASSERT_EQ(segment_index_from(l.cu.data(), from, t), segment_index(l.cu.data(), r, t)) << t0 << " → " << t;
        ASSERT_EQ(first_key_from(l.cu.data(), from, t, l.window), first_key(l.cu.data(), r, t, l.window));
      }
    }
  }
}

// Forward: a block of `rows` queries walks the key tiles of block_keys; each group of rows (a warpgroup of 64 in
// v4–v8, a warp of 16 or 32 in v2 / v3) classifies every tile from its first and last rows' first keys and masks
// the elements of masked tiles with each row's first key (t + 1 for rows past the end: nothing).
TEST(AttentionSchedule, ForwardWalkCoversEveryAllowedKeyAndTileKindsAreExact) {
  constexpr int kTile = 64;
  const std::vector<Layout> all = layouts();
  for (size_t n = 0; n < 60 && n < all.size(); ++n) {
    const Layout& l = all[n];
    SCOPED_TRACE(l.describe());
    const int tokens = l.tokens(), r = static_cast<int>(l.cu.size());
    auto first = [&](int t) { return static_cast<int>(first_key(l.cu.data(), r, t, l.window)); };
    for (const auto& [rows, group] : {std::pair{128, 64}, std::pair{192, 64}, std::pair{128, 16}, std::pair{128, 32}}) {
      for (int q0 = 0; q0 < tokens; q0 += rows) {
        const BlockKeys keys = block_keys<kTile>(l.cu.data(), r, q0, rows, tokens, l.window);
        const int q_end = std::min(q0 + rows, tokens);
        ASSERT_EQ(keys.kv_end, q_end);
        for (int t = q0; t < q_end; ++t) {
          for (int s = first(t); s <= t; ++s) {
            ASSERT_TRUE(s >= keys.key_begin && s < keys.key_begin + kTile * keys.tiles)
                << "rows of " << rows << " at " << q0 << ": query " << t << "'s key " << s << " is not walked";
          }
        }
        for (int w0 = q0; w0 < q0 + rows; w0 += group) {
          const int w_last = std::min(w0 + group - 1, tokens - 1);  // < w0 for a group wholly past the end
          const int lo_first = w0 < tokens ? first(w0) : 0, lo_last = w0 < tokens ? first(w_last) : 0;
          for (int tile = 0; tile < keys.tiles; ++tile) {
            const int k0 = keys.key_begin + kTile * tile;
            const TileKind kind = classify_keys<kTile>(k0, w0, w_last, lo_first, lo_last);
            int pairs = 0;
            for (int t = w0; t < w0 + group; ++t) {
              const int lo_row = t < tokens ? first(t) : t + 1;
              for (int k = k0; k < k0 + kTile; ++k) {
                const bool ok = t < tokens && k < tokens && allowed(l, t, k);
                ASSERT_EQ(!(k < lo_row || k > t), ok) << "mask of query " << t << ", key " << k;
                pairs += ok;
              }
            }
            if (kind == TileKind::skip) {
              EXPECT_EQ(pairs, 0) << "skipped tile at " << k0 << " for rows " << w0 << "…" << w_last;
            }
            if (kind == TileKind::full) {  // rows past the end compute unmasked but are never stored
              const int valid_rows = std::max(0, std::min(w0 + group, tokens) - w0);
              EXPECT_EQ(pairs, valid_rows * kTile) << "full tile at " << k0 << " for rows " << w0 << "…" << w_last;
            }
          }
        }
      }
    }
  }
}

// The statistics the loader writes for the tile at q0: first allowed key per query, `tokens` past q_end.
std::vector<int> tile_first_keys(const Layout& l, const KeyBlock& b, int q0) {
  std::vector<int> lo(kQueries);
  for (int i = 0; i < kQueries; ++i) {
    const int q = q0 + i;
    lo[i] = q <= b.q_end ? static_cast<int>(first_key(l.cu.data(), static_cast<int>(l.cu.size()), q, l.window))
                         : l.tokens();
  }
  return lo;
}

TEST(AttentionSchedule, KeyBlockLoopCoversEveryQueryThatSeesItsKeys) {
  for (const Layout& l : layouts()) {
    SCOPED_TRACE(l.describe());
    const int tokens = l.tokens(), r = static_cast<int>(l.cu.size());
    for (int s0 = 0; s0 < tokens; s0 += kKeys) {
      const KeyBlock b(l.cu.data(), r, s0, tokens, l.window);
      ASSERT_LT(b.q_end, tokens);
      ASSERT_LE(b.s0 + (b.tiles - 1) * kQueries, b.q_end) << "every tile of the loop starts at or before q_end";
      for (int s = s0; s < std::min(s0 + kKeys, tokens); ++s) {
        for (int t = s; t < tokens; ++t) {
          if (allowed(l, t, s)) {
            ASSERT_LE(t, b.q_end) << "key " << s << " is seen by query " << t;
          }
        }
      }
    }
  }
}

TEST(AttentionSchedule, SkippedHalvesHaveNoAllowedPairAndFullHalvesOnlyAllowedOnes) {
  for (const Layout& l : layouts()) {
    SCOPED_TRACE(l.describe());
    const int tokens = l.tokens(), r = static_cast<int>(l.cu.size());
    for (int s0 = 0; s0 < tokens; s0 += kKeys) {
      const KeyBlock b(l.cu.data(), r, s0, tokens, l.window);
      for (int n = 0; n < b.tiles; ++n) {
        const int q0 = s0 + n * kQueries;
        const std::vector<int> lo = tile_first_keys(l, b, q0);
        bool any_pair = false;
        for (int w = 0; w < kKeys / kHalf; ++w) {
          const TileKind kind = b.classify(w, q0, tokens, lo.data());
          int pairs = 0, valid_cells = 0;
          for (int i = 0; i < kQueries; ++i) {
            for (int k = s0 + kHalf * w; k < s0 + kHalf * (w + 1); ++k) {
              const int q = q0 + i;
              const bool in_range = q < tokens && k < tokens;
              const bool ok = in_range && allowed(l, q, k);
              // The kernel's per-element mask on masked tiles.
              const bool mask = k < tokens && k <= q && k >= lo[i];
              if (in_range) {
                ASSERT_EQ(mask, ok) << "mask of query " << q << ", key " << k;
              }
              pairs += ok;
              valid_cells += in_range;
            }
          }
          any_pair = any_pair || pairs > 0;
          if (kind == TileKind::skip) {
            EXPECT_EQ(pairs, 0) << "skipped half " << w << " of tile at " << q0;
          }
          if (kind == TileKind::full) {
            EXPECT_EQ(pairs, kQueries * kHalf) << "full half " << w << " of tile at " << q0;
            EXPECT_EQ(valid_cells, kQueries * kHalf);
          }
        }
        EXPECT_EQ(b.contributes(q0, tokens, lo[0]), any_pair) << "block at " << s0 << ", tile at " << q0;
        EXPECT_EQ(first_key(l.cu.data(), r, q0, l.window), lo[0]) << "the adder warps' own first key";
      }
    }
  }
}

TEST(AttentionSchedule, DqAddersOfATileAreAContiguousRangeRankedFromTheDiagonalDown) {
  for (const Layout& l : layouts()) {
    SCOPED_TRACE(l.describe());
    const int tokens = l.tokens(), r = static_cast<int>(l.cu.size());
    const int blocks = (tokens + kKeys - 1) / kKeys, tiles = (tokens + kQueries - 1) / kQueries;
    std::vector<std::vector<int>> adders(tiles);  // key blocks that add to each query tile, in block order
    for (int j = 0; j < blocks; ++j) {
      const KeyBlock b(l.cu.data(), r, j * kKeys, tokens, l.window);
      for (int n = 0; n < b.tiles; ++n) {
        const int q0 = b.s0 + n * kQueries;
        if (b.contributes(q0, tokens, tile_first_keys(l, b, q0)[0])) adders[q0 / kQueries].push_back(j);
      }
    }
    for (int i = 0; i < tiles; ++i) {
      const std::vector<int>& a = adders[i];
      const int q0 = i * kQueries, diagonal = (std::min(q0 + kQueries, tokens) - 1) / kKeys;
      ASSERT_FALSE(a.empty()) << "tile " << i << " gets no dQ";
      EXPECT_EQ(a.back(), diagonal) << "tile " << i << ": the last adder is the block of its last query";
      std::vector<int> ranks;
      for (size_t k = 0; k < a.size(); ++k) {
        if (k > 0) {
          EXPECT_EQ(a[k], a[k - 1] + 1) << "tile " << i << ": adders are contiguous";
        }
        ranks.push_back(KeyBlock::dq_rank(q0, tokens, a[k]));
      }
      std::sort(ranks.begin(), ranks.end());
      for (size_t k = 0; k < ranks.size(); ++k) EXPECT_EQ(ranks[k], static_cast<int>(k)) << "tile " << i;
      // Every allowed pair of the tile's queries has its key's block among the adders.
      for (int t = q0; t < std::min(q0 + kQueries, tokens); ++t) {
        for (int s = std::max(0, t - l.window); s <= t; ++s) {
          if (allowed(l, t, s)) {
            EXPECT_TRUE(std::binary_search(a.begin(), a.end(), s / kKeys))
                << "query " << t << " sees key " << s << " but its block does not add to the tile";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace gpt::cuda::attn
