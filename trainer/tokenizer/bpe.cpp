#include "trainer/tokenizer/bpe.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "base/check.h"
#include "base/fnv1a.h"

namespace gpt {
namespace {

// FNV-1a over the bytes with a final avalanche; token strings are short (mean ~6 bytes).
uint64_t hash_bytes(std::string_view bytes) {
  uint64_t h = fnv1a64(bytes);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  return h;
}

// Piece length from which the heap strategy beats rescanning all pairs after each merge.
constexpr size_t kHeapMergeMinLength = 64;

constexpr int32_t kNoRank = RankTable::kNotFound;

}  // namespace

RankTable::RankTable() : slots_(1024) { byte_ranks_.fill(kNotFound); }

size_t RankTable::slot_index(std::string_view bytes) const {
  const size_t mask = slots_.size() - 1;
  size_t index = hash_bytes(bytes) & mask;
  while (true) {
    const Slot& slot = slots_[index];
    if (slot.rank == kNotFound) return index;
    if (slot.length == bytes.size() && arena_.compare(slot.offset, slot.length, bytes) == 0) return index;
    index = (index + 1) & mask;
  }
}

void RankTable::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  for (const Slot& slot : old) {
    if (slot.rank == kNotFound) continue;
    slots_[slot_index(std::string_view(arena_).substr(slot.offset, slot.length))] = slot;
  }
}

bool RankTable::insert(std::string_view bytes, int32_t rank) {
  GPT_CHECK(rank >= 0, "RankTable::insert: rank must be >= 0, got ", rank);
  GPT_CHECK(arena_.size() + bytes.size() <= std::numeric_limits<uint32_t>::max(), "RankTable: arena full");
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const size_t index = slot_index(bytes);
  if (slots_[index].rank != kNotFound) return false;
  const Slot slot{static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(bytes.size()), rank};
  arena_.append(bytes);
  slots_[index] = slot;
  if (static_cast<size_t>(rank) >= slot_of_rank_.size()) slot_of_rank_.resize(static_cast<size_t>(rank) + 1);
  slot_of_rank_[static_cast<size_t>(rank)] = slot;
  if (bytes.size() == 1) byte_ranks_[static_cast<unsigned char>(bytes[0])] = rank;
  ++count_;
  return true;
}

int32_t RankTable::find(std::string_view bytes) const {
  if (bytes.size() == 1) return byte_ranks_[static_cast<unsigned char>(bytes[0])];
  return slots_[slot_index(bytes)].rank;
}

std::string_view RankTable::bytes_of(int32_t rank) const {
  GPT_CHECK(rank >= 0 && static_cast<size_t>(rank) < slot_of_rank_.size() &&
                slot_of_rank_[static_cast<size_t>(rank)].rank == rank,
            "RankTable::bytes_of: no byte string has rank ", rank);
  const Slot& slot = slot_of_rank_[static_cast<size_t>(rank)];
  return std::string_view(arena_).substr(slot.offset, slot.length);
}

void bpe_merge_linear(const RankTable& ranks, std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out) {
  // Parts are [starts[k], starts[k+1]); pair_ranks[k] is the rank of parts k and k+1 merged.
  auto& starts = scratch.starts;
  auto& pair_ranks = scratch.pair_ranks;
  const size_t n = piece.size();
  starts.resize(n + 1);
  pair_ranks.resize(n);
  for (size_t k = 0; k <= n; ++k) starts[k] = static_cast<uint32_t>(k);
  const auto merged_rank = [&](size_t k, size_t parts) {
    // Rank of parts k and k+1 merged, given the current number of parts.
    if (k + 2 > parts) return kNoRank;
    return ranks.find(piece.substr(starts[k], starts[k + 2] - starts[k]));
  };
  size_t parts = n;
  for (size_t k = 0; k + 1 < parts; ++k) pair_ranks[k] = merged_rank(k, parts);
  while (parts > 1) {
    size_t best = parts;
    int32_t best_rank = std::numeric_limits<int32_t>::max();
    for (size_t k = 0; k + 1 < parts; ++k) {
      if (pair_ranks[k] != kNoRank && pair_ranks[k] < best_rank) {
        best_rank = pair_ranks[k];
        best = k;
      }
    }
    if (best == parts) break;
    // Merge parts best and best+1: drop boundary best+1, then refresh the two pairs touching the new part.
    starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    pair_ranks.erase(pair_ranks.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    --parts;
    if (best + 1 < parts) pair_ranks[best] = merged_rank(best, parts);
    if (best > 0) pair_ranks[best - 1] = merged_rank(best - 1, parts);
  }
  for (size_t k = 0; k < parts; ++k) {
    const int32_t rank = ranks.find(piece.substr(starts[k], starts[k + 1] - starts[k]));
    GPT_CHECK(rank != kNoRank, "BPE: a part of the piece has no rank (ranks file lacks a single byte?)");
    out.push_back(rank);
  }
}

void bpe_merge_heap(const RankTable& ranks, std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out) {
  // Parts form a linked list indexed by their start byte; next[i] == n ends the list.
  // pair_ranks[i] is the rank of part i merged with its successor (kNoRank if none); a heap entry
  // (rank, i) is current only while pair_ranks[i] still equals rank and i is alive.
  const size_t n = piece.size();
  GPT_CHECK(n < (uint64_t{1} << 40), "BPE: piece of ", n, " bytes is too long");
  auto& next = scratch.next;
  auto& prev = scratch.prev;
  auto& pair_ranks = scratch.pair_ranks;
  auto& heap = scratch.heap;
  next.resize(n);
  prev.resize(n);
  pair_ranks.assign(n, kNoRank);
  heap.clear();
  const uint32_t end = static_cast<uint32_t>(n);
  for (uint32_t i = 0; i < end; ++i) {
    next[i] = i + 1;
    prev[i] = i == 0 ? end : i - 1;  // end doubles as "no predecessor"
  }
  const auto key = [](int32_t rank, uint32_t start) { return (static_cast<uint64_t>(rank) << 40) | start; };
  const auto update_pair = [&](uint32_t i) {
    const uint32_t j = next[i];
    int32_t rank = kNoRank;
    if (j < end) rank = ranks.find(piece.substr(i, (next[j] < end ? next[j] : end) - i));
    pair_ranks[i] = rank;
    if (rank != kNoRank) {
      heap.push_back(key(rank, i));
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  };
  for (uint32_t i = 0; i + 1 < end; ++i) update_pair(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const uint64_t top = heap.back();
    heap.pop_back();
    const auto i = static_cast<uint32_t>(top & ((uint64_t{1} << 40) - 1));
    const auto rank = static_cast<int32_t>(top >> 40);
    if (pair_ranks[i] != rank) continue;  // stale: part i changed or died since this entry was pushed
    const uint32_t j = next[i];
    next[i] = next[j];
    if (next[j] < end) prev[next[j]] = i;
    pair_ranks[j] = kNoRank;  // j is absorbed into i
    update_pair(i);
    if (prev[i] < end) update_pair(prev[i]);
  }
  for (uint32_t i = 0; i < end; i = next[i]) {
    const int32_t rank = ranks.find(piece.substr(i, next[i] - i));
    GPT_CHECK(rank != kNoRank, "BPE: a part of the piece has no rank (ranks file lacks a single byte?)");
    out.push_back(rank);
  }
}

namespace {

// Parts of a run of one unit u, once every copy of u is one token, are u^length; equal neighbours form a group
// (length, count). Groups stay few (one per distinct token length in flight), so each merge step scans them all.
struct PartGroup {
  size_t length;
  size_t count;
};

class RepeatedUnitRanks {
 public:
  RepeatedUnitRanks(const RankTable& ranks, std::string_view unit) : ranks_(ranks), unit_(unit) {}
  // Rank of u^length, kNoRank when it is not a token.
  int32_t of(size_t length) {
    if (length >= cache_.size()) cache_.resize(length + 1, kUnknown);
    if (cache_[length] == kUnknown) {
      std::string bytes;
      for (size_t i = 0; i < length; ++i) bytes += unit_;
      cache_[length] = ranks_.find(bytes);
    }
    return cache_[length];
  }

 private:
  static constexpr int32_t kUnknown = -2;
  const RankTable& ranks_;
  std::string_view unit_;
  std::vector<int32_t> cache_;
};

// True when rank `candidate` is merged after rank `current` (absent pairs never merge).
bool merges_later(int32_t candidate, int32_t current) { return candidate == kNoRank || candidate > current; }

// Whether every copy of `unit` in a run becomes one token before any pair across two copies merges: the unit's own
// merges (run alone, as BPE does) end in one token, and every pair of a last part of one copy and a first part of the
// next, in any of the states the copies pass through, ranks after all of those merges.
bool copies_complete_first(const RankTable& ranks, std::string_view unit) {
  std::vector<std::vector<std::string_view>> states;
  std::vector<std::string_view> parts;
  for (size_t i = 0; i < unit.size(); ++i) parts.push_back(unit.substr(i, 1));
  states.push_back(parts);
  int32_t last_merge = kNoRank;
  for (;;) {
    int32_t best = kNoRank;
    size_t at = 0;
    for (size_t k = 0; k + 1 < parts.size(); ++k) {
      const std::string_view pair(parts[k].data(), parts[k].size() + parts[k + 1].size());
      const int32_t rank = ranks.find(pair);
      if (rank != kNoRank && (best == kNoRank || rank < best)) {
        best = rank;
        at = k;
      }
    }
    if (best == kNoRank) break;
    last_merge = std::max(last_merge, best);
    parts[at] = std::string_view(parts[at].data(), parts[at].size() + parts[at + 1].size());
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    states.push_back(parts);
  }
  if (parts.size() != 1) return false;
  for (const auto& left : states) {
    for (const auto& right : states) {
      const std::string across = std::string(left.back()) + std::string(right.front());
      const int32_t rank = ranks.find(across);
      if (!merges_later(rank, last_merge)) return false;
    }
  }
  return true;
}

}  // namespace

bool bpe_merge_repeated_unit(const RankTable& ranks, std::string_view unit, size_t count, std::vector<int32_t>& out) {
  if (count == 0) return true;
  if (unit.empty() || !copies_complete_first(ranks, unit)) return false;
  RepeatedUnitRanks rank_of(ranks, unit);
  std::vector<PartGroup> groups{{1, count}};
  // Normalises after a change: drops empty groups and joins equal neighbours.
  const auto tidy = [&] {
    std::vector<PartGroup> next;
    for (const PartGroup& g : groups) {
      if (g.count == 0) continue;
      if (!next.empty() && next.back().length == g.length) {
        next.back().count += g.count;
      } else {
        next.push_back(g);
      }
    }
    groups.swap(next);
  };
  for (;;) {
    // The lowest-ranked adjacent pair, leftmost on ties: inside a group (its first two parts) or across a boundary
    // (the last part of a group and the first of the next). Groups are in text order, and so are these candidates.
    int32_t best_rank = kNoRank;
    size_t best_group = 0;
    bool best_inside = false;
    const auto consider = [&](int32_t rank, size_t group, bool inside) {
      if (rank != kNoRank && (best_rank == kNoRank || rank < best_rank)) {
        best_rank = rank;
        best_group = group;
        best_inside = inside;
      }
    };
    for (size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].count >= 2) consider(rank_of.of(2 * groups[i].length), i, true);
      if (i + 1 < groups.size()) consider(rank_of.of(groups[i].length + groups[i + 1].length), i, false);
    }
    if (best_rank == kNoRank) break;
    PartGroup& g = groups[best_group];
    if (!best_inside) {
      // Last part of group i + first part of group i+1 -> one part between them.
      PartGroup& h = groups[best_group + 1];
      const PartGroup merged{g.length + h.length, 1};
      --g.count;
      --h.count;
      groups.insert(groups.begin() + static_cast<std::ptrdiff_t>(best_group) + 1, merged);
      tidy();
      continue;
    }
    // Inside group (L, c): the pairs (0,1), (2,3), … merge one after the other, leftmost first, as long as no pair
    // that these merges create ranks before them: (previous part, 2L), (2L, L) and (2L, 2L). Then the whole group
    // becomes (2L, c/2) followed by (L, c%2) in one step; otherwise only its first pair merges.
    const size_t L = g.length;
    const int32_t r = best_rank;
    const bool batch = (best_group == 0 || merges_later(rank_of.of(groups[best_group - 1].length + 2 * L), r)) &&
                       (g.count < 3 || merges_later(rank_of.of(3 * L), r)) &&
                       (g.count < 4 || merges_later(rank_of.of(4 * L), r));
    const size_t pairs = batch ? g.count / 2 : 1;
    const PartGroup merged{2 * L, pairs};
    g.count -= 2 * pairs;
    groups.insert(groups.begin() + static_cast<std::ptrdiff_t>(best_group), merged);
    tidy();
  }
  for (const PartGroup& g : groups) out.insert(out.end(), g.count, rank_of.of(g.length));
  return true;
}

// Length of the repeating unit when `piece` is one UTF-8 character (or one invalid byte) repeated, else 0.
size_t repeated_character_length(std::string_view piece) {
  const auto lead = static_cast<unsigned char>(piece.front());
  const size_t n = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (piece.size() % n != 0) return 0;
  if (piece.compare(n, std::string_view::npos, piece.substr(0, piece.size() - n)) != 0) return 0;
  return n;
}

void bpe_encode_piece(const RankTable& ranks, std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out) {
  if (piece.empty()) return;
  // Most pieces of prose are whole tokens: one lookup instead of a merge loop.
  if (const int32_t whole = ranks.find(piece); whole != kNoRank) {
    out.push_back(whole);
    return;
  }
  if (piece.size() < kHeapMergeMinLength) {
    bpe_merge_linear(ranks, piece, scratch, out);
    return;
  }
  if (const size_t unit = repeated_character_length(piece); unit != 0) {
    if (bpe_merge_repeated_unit(ranks, piece.substr(0, unit), piece.size() / unit, out)) return;
  }
  bpe_merge_heap(ranks, piece, scratch, out);
}

}  // namespace gpt
