#pragma once
// Deterministic grouping of tokens by the table row they hit, for the scatter-add backwards (embedding, bigram):
// a stable radix sort of (row id, token index) pairs, so every row's tokens come out in increasing token order.
#include <cstdint>

#include "kernels/cuda/device_utils.cuh"

namespace gpt::cuda {

struct TokensByRow {
  DeviceScratch storage;       // sorted ids [n] then token order [n] (int32 each)
  const int32_t* sorted_ids;   // ids in increasing order
  const int32_t* token_order;  // token index of each sorted position (ascending within one id)
};

// ids: device int32 [n] with values in [0, rows). n < 2^31.
TokensByRow sort_tokens_by_row(const int32_t* ids, int64_t n, int64_t rows);

// True for the first sorted position of each run of equal ids.
__device__ __forceinline__ bool starts_run(const int32_t* sorted_ids, int64_t pos) {
  return pos == 0 || sorted_ids[pos] != sorted_ids[pos - 1];
}

}  // namespace gpt::cuda
