#pragma once
// Byte-pair encoding of one pre-tokenized piece against a table of mergeable byte strings and their ranks.
//
// Semantics (tiktoken's): start from single bytes; repeatedly merge the adjacent pair whose concatenated
// bytes have the lowest rank (leftmost on ties) until no adjacent pair is a known byte string; the token
// ids are the ranks of the final parts.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpt {

// Open-addressing hash table from byte string to rank; the byte strings live in one arena.
class RankTable {
 public:
  static constexpr int32_t kNotFound = -1;

  RankTable();
  // Adds bytes with the given rank; returns false (and changes nothing) when bytes is already present.
  bool insert(std::string_view bytes, int32_t rank);
  int32_t find(std::string_view bytes) const;
  size_t size() const { return count_; }
  // Byte strings of ranks 0..size()-1 (valid when ranks are dense, as after a successful load).
  std::string_view bytes_of(int32_t rank) const;
  // Rank of a one-byte string, kNotFound when absent; the hot path of BPE.
  int32_t byte_rank(unsigned char byte) const { return byte_ranks_[byte]; }

 private:
  struct Slot {
    uint32_t offset = 0;
    uint32_t length = 0;
    int32_t rank = kNotFound;  // kNotFound marks an empty slot
  };
  void grow();
  size_t slot_index(std::string_view bytes) const;

  std::string arena_;
  std::vector<Slot> slots_;         // capacity is a power of two, at most half full
  std::vector<Slot> slot_of_rank_;  // by rank; rank kNotFound where no string has that rank
  size_t count_ = 0;
  std::array<int32_t, 256> byte_ranks_;
};

// Reusable buffers so that encoding many pieces allocates nothing per piece.
struct BpeScratch {
  std::vector<uint32_t> starts;
  std::vector<int32_t> pair_ranks;
  std::vector<uint32_t> next;
  std::vector<uint32_t> prev;
  std::vector<uint64_t> heap;
};

// Appends the token ids of piece to out. Every byte of piece must have a rank.
void bpe_encode_piece(const RankTable& ranks, std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out);

// The two merge strategies bpe_encode_piece chooses between by piece length; exposed to test that they agree.
// Linear: rescans all pairs after each merge (fast for short pieces, quadratic in length).
void bpe_merge_linear(const RankTable& ranks, std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out);
// Heap: priority queue over (rank, position) with lazy invalidation, O(n log n) for long pieces.
void bpe_merge_heap(const RankTable& ranks, std::string_view piece, BpeScratch& scratch, std::vector<int32_t>& out);
// A piece of `count` copies of one short unit (a long run of one character: "aaaa…", spaces, "éééé…"), merged on a
// run-length form of the parts: time linear in the number of merges, memory independent of `count` (the heap needs
// ~28 bytes per input byte). Valid when every copy of the unit becomes one token before any pair across copies can
// merge (checked from the unit's own merges and ranks); returns false, appending nothing, when that does not hold.
// Same result as the other two strategies whenever it returns true.
bool bpe_merge_repeated_unit(const RankTable& ranks, std::string_view unit, size_t count, std::vector<int32_t>& out);

}  // namespace gpt
