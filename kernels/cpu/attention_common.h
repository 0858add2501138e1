#pragma once
// CPU helpers shared by the attention-family references: the segment [begin, end) of every token, from
// a validated cu_seqlens table (kernels/attention.h), and the size below which loops stay serial.
#include <cstdint>
#include <vector>

#include "kernels/attention.h"

namespace gpt::cpu {

// Below this many multiply-adds an OpenMP team costs more than it saves (tests call the ops thousands
// of times on tiny shapes; on a loaded machine idle threads spin).
inline constexpr int64_t kParallelMinWork = int64_t{1} << 16;

struct TokenSegments {
  std::vector<int64_t> begin;  // first token of the token's segment
  std::vector<int64_t> end;    // one past the last token of the token's segment
};

inline TokenSegments token_segments(const Tensor& cu_seqlens, int64_t tokens, const char* op) {
  check_cu_seqlens_values(cu_seqlens, tokens, op);
  const int32_t* cu = cu_seqlens.data<int32_t>();
  TokenSegments seg{std::vector<int64_t>(static_cast<size_t>(tokens)),
                    std::vector<int64_t>(static_cast<size_t>(tokens))};
  for (int64_t i = 0; i + 1 < cu_seqlens.size(0); ++i) {
    for (int64_t t = cu[i]; t < cu[i + 1]; ++t) {
      seg.begin[static_cast<size_t>(t)] = cu[i];
      seg.end[static_cast<size_t>(t)] = cu[i + 1];
    }
  }
  return seg;
}

}  // namespace gpt::cpu
