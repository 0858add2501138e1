#pragma once
// The work plan of scatter version 2 (kernels/cuda/embedding.cu), which does not touch data: the token positions in
// sorted-id order (row_sort.cuh) are cut into chunks of kScatterChunk positions, one block per chunk, so that a row
// hit by thousands of tokens (natural text is Zipf-distributed: BOS, ",", " the") spreads over many blocks instead of
// one. Within a chunk the positions form segments of equal ids. A segment whose run of equal ids lies wholly inside
// the chunk is summed and added into its row at once, exactly as version 1 does; a segment of a run that crosses a
// chunk boundary leaves a partial sum in the accumulation type in one slot of a scratch buffer, and a second kernel
// adds the run's partials in chunk order into the row. Every order is fixed, so the result is the same from run to
// run; runs that cross a chunk boundary are summed in pieces, so their rounding differs from version 1's.
// Plain C++ with host-device qualifiers under nvcc, so that the CPU tests can check the plan on the same code the
// GPU runs (tests/kernels/scatter_plan_test.cpp).
#include <cstdint>

#if defined(__CUDACC__)
#define GPT_SCATTER_HD __host__ __device__ __forceinline__
#else
#define GPT_SCATTER_HD inline
#endif

namespace gpt::cuda::scatter_plan {

// Sorted positions per block: short enough that the longest run of a 49,152-token microbatch (several thousand
// tokens) spreads over a hundred blocks, long enough that a block's loads of one chunk keep the memory busy.
inline constexpr int kScatterChunk = 32;

// Partial slots per chunk, each one row of d values in the accumulation type.
inline constexpr int kSlotContinued = 0;  // the chunk's first segment, of a run that began in an earlier chunk
inline constexpr int kSlotStarted = 1;    // the chunk's last segment, of a run that begins here and goes on
inline constexpr int kSlotsPerChunk = 2;

// What the block does after adding the token at a sorted position into its running sum.
enum class Action : int8_t {
  accumulate,     // the next position belongs to the same segment
  add_into_row,   // last token of a run inside the chunk: dtable[target] += sum
  store_partial,  // last token of a run's piece: partial slot `target` = sum
  drop,           // last token of a run of ids outside the table: the sum is discarded
};

struct Step {
  Action action;
  int64_t target;  // the row (add_into_row) or the partial slot (store_partial)
};

GPT_SCATTER_HD int64_t chunk_count(int64_t n) { return (n + kScatterChunk - 1) / kScatterChunk; }

GPT_SCATTER_HD int64_t partial_slot(int64_t chunk, int which) { return chunk * kSlotsPerChunk + which; }

// The step after the token at sorted position pos (0 <= pos < n) of ids sorted in increasing order.
GPT_SCATTER_HD Step step_at(const int32_t* sorted_ids, int64_t n, int64_t rows, int64_t pos) {
  const int64_t chunk = pos / kScatterChunk, begin = chunk * kScatterChunk;
  const int64_t end = begin + kScatterChunk < n ? begin + kScatterChunk : n;
  const int32_t row = sorted_ids[pos];
  if (pos + 1 < end && sorted_ids[pos + 1] == row) return {Action::accumulate, 0};
  if (row < 0 || row >= rows) return {Action::drop, 0};
  if (begin > 0 && sorted_ids[begin - 1] == row) return {Action::store_partial, partial_slot(chunk, kSlotContinued)};
  if (pos + 1 < n && sorted_ids[pos + 1] == row) return {Action::store_partial, partial_slot(chunk, kSlotStarted)};
  return {Action::add_into_row, row};
}

// True when a run of a valid row begins in `chunk` and continues past its end: the combine of that run belongs
// to this chunk (its partials: this chunk's started slot, then the continued slots of the chunks after it).
GPT_SCATTER_HD bool starts_crossing_run(const int32_t* sorted_ids, int64_t n, int64_t rows, int64_t chunk) {
  const int64_t next = (chunk + 1) * kScatterChunk;  // the first position after the chunk
  if (next >= n) return false;
  const int32_t row = sorted_ids[next - 1];
  if (sorted_ids[next] != row) return false;
  if (chunk > 0 && sorted_ids[chunk * kScatterChunk - 1] == row) return false;
  return row >= 0 && row < rows;
}

// True when chunk j's first position still holds `row`: chunk j's continued slot belongs to row's run. For the
// chunks after the one where row's run starts, this holds for a prefix of them and then never again.
GPT_SCATTER_HD bool run_continues_into(const int32_t* sorted_ids, int64_t n, int32_t row, int64_t j) {
  return j * kScatterChunk < n && sorted_ids[j * kScatterChunk] == row;
}

}  // namespace gpt::cuda::scatter_plan
