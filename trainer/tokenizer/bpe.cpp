#include "trainer/tokenizer/bpe.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "kernels/check.h"

namespace gpt {
namespace {

// FNV-1a over the bytes with a final avalanche; token strings are short (mean ~6 bytes).
uint64_t hash_bytes(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
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

void bpe_merge_linear(const RankTable& ranks, std::string_view piece, BpeScratch& scratch,
                      std::vector<int32_t>& out) {
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

void bpe_merge_heap(const RankTable& ranks, std::string_view piece, BpeScratch& scratch,
                    std::vector<int32_t>& out) {
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
  const auto key = [](int32_t rank, uint32_t start) {
    return (static_cast<uint64_t>(rank) << 40) | start;
  };
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

void bpe_encode_piece(const RankTable& ranks, std::string_view piece, BpeScratch& scratch,
                      std::vector<int32_t>& out) {
  if (piece.empty()) return;
  // Most pieces of prose are whole tokens: one lookup instead of a merge loop.
  if (const int32_t whole = ranks.find(piece); whole != kNoRank) {
    out.push_back(whole);
    return;
  }
  if (piece.size() < kHeapMergeMinLength) {
    bpe_merge_linear(ranks, piece, scratch, out);
  } else {
    bpe_merge_heap(ranks, piece, scratch, out);
  }
}

}  // namespace gpt
