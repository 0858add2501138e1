#pragma once
// Validation loader (RECIPE §6): the first `total_tokens` targets of the validation stream, read as consecutive
// windows of Tv inputs plus one target; step j on rank r reads [o, o + Tv + 1) with o = j·W·Tv + r·Tv, so the
// windows tile [0, total_tokens) exactly and the mean loss does not depend on W. Not BOS-aligned.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "trainer/data/host_products.h"
#include "trainer/data/train_loader.h"

namespace gpt {

struct ValLoaderOptions {
  std::vector<std::filesystem::path> shards;  // read as one stream in this order (usually one file)
  std::int64_t total_tokens = 10'485'760;     // targets evaluated
  std::int64_t window_tokens = 262'144;       // Tv
  int world_size = 1;
  int rank = 0;
  std::int32_t cu_seqlens_rows = 896;          // R for Tv = 262144; choose per Tv
  std::int32_t bigram_rows = kHeadBigramRows;  // M = bigram_rows - 1
  std::int64_t ngram_rows = 0;                 // §S.2 n-gram table rows (0 = off: no n-gram products)
  ShardOpenOptions open{};
};

// Offset of the window that rank `rank` of `world` reads at validation step `step`.
std::int64_t validation_window_offset(std::int64_t step, int rank, int world, std::int64_t window_tokens);

class ValLoader {
 public:
  explicit ValLoader(ValLoaderOptions options);

  // Forward passes per rank: total / (W·Tv) (5A for the reference).
  std::int64_t steps() const { return steps_; }
  // This rank's window at validation step `step` (inputs, targets, cu_seqlens by BOS, bigram ids, sign rows).
  // `slice` and `microbatch` hold the step; `pieces` holds the window's token range in the stream.
  Microbatch window(std::int64_t step) const;

 private:
  ValLoaderOptions options_;
  std::int64_t steps_ = 0;
  std::int64_t first_offset_ = 0;      // stream offset of tokens_[0]
  std::vector<std::uint16_t> tokens_;  // this rank's windows only
};

}  // namespace gpt
