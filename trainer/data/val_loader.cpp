#include "trainer/data/val_loader.h"

#include <algorithm>
#include <cstdint>

#include "base/check.h"

namespace gpt {

std::int64_t validation_window_offset(std::int64_t step, int rank, int world, std::int64_t window_tokens) {
  return step * world * window_tokens + rank * window_tokens;
}

ValLoader::ValLoader(ValLoaderOptions options) : options_(std::move(options)) {
  const int W = options_.world_size;
  const std::int64_t Tv = options_.window_tokens;
  GPT_CHECK(!options_.shards.empty(), "validation: no validation shards given");
  GPT_CHECK(W == 1 || W == 2 || W == 4 || W == 8, "validation: world size must be 1, 2, 4 or 8, got ", W);
  GPT_CHECK(options_.rank >= 0 && options_.rank < W, "validation: rank ", options_.rank, " outside [0, ", W, ")");
  GPT_CHECK(Tv > 0 && Tv <= INT32_MAX, "validation: window length Tv must be in [1, 2^31), got ", Tv);
  GPT_CHECK(options_.total_tokens > 0 && options_.total_tokens % (W * Tv) == 0, "validation: total tokens ",
            options_.total_tokens, " must be a positive multiple of W x Tv = ", W * Tv);
  GPT_CHECK(options_.bigram_rows >= 2, "validation: bigram rows must be >= 2, got ", options_.bigram_rows);
  GPT_CHECK(options_.ngram_rows == 0 ||
                (options_.ngram_rows >= 4 && options_.ngram_rows % 2 == 0 && options_.ngram_rows <= INT32_MAX),
            "validation: ngram_rows must be 0 (off) or even, >= 4 and below 2^31, got ", options_.ngram_rows);
  steps_ = options_.total_tokens / (W * Tv);

  // Keep only the span this rank reads: from its first window to the end of its last (one extra target).
  first_offset_ = validation_window_offset(0, options_.rank, W, Tv);
  const std::int64_t end = validation_window_offset(steps_ - 1, options_.rank, W, Tv) + Tv + 1;
  // No reserve from the requested span: it comes from the recipe and may exceed the data (and memory) by far; the
  // buffer grows only as far as the shards reach, and the check below names what is missing.
  std::int64_t stream_pos = 0;
  for (const auto& path : options_.shards) {
    if (stream_pos >= end) break;
    const Shard shard = Shard::open(path, options_.open);
    check_corpus_shard(shard, ShardSplit::val);
    const auto n = static_cast<std::int64_t>(shard.size());
    const std::int64_t lo = std::clamp(first_offset_ - stream_pos, std::int64_t{0}, n);
    const std::int64_t hi = std::clamp(end - stream_pos, std::int64_t{0}, n);
    tokens_.insert(tokens_.end(), shard.tokens().begin() + lo, shard.tokens().begin() + hi);
    stream_pos += n;
  }
  GPT_CHECK(stream_pos >= options_.total_tokens + 1, "validation: needs ", options_.total_tokens + 1, " tokens (",
            options_.total_tokens, " targets + 1), but the ", options_.shards.size(),
            " validation shard(s) starting with ", options_.shards.front().string(), " hold only ", stream_pos);
}

Microbatch ValLoader::window(std::int64_t step) const {
  GPT_CHECK(step >= 0 && step < steps_, "validation: step ", step, " outside [0, ", steps_, ")");
  const std::int64_t Tv = options_.window_tokens;
  const std::int64_t offset = validation_window_offset(step, options_.rank, options_.world_size, Tv);
  const auto begin = tokens_.begin() + (offset - first_offset_);
  Microbatch mb;
  mb.slice = static_cast<int>(step);
  mb.microbatch = static_cast<int>(step);
  mb.inputs.assign(begin, begin + Tv);
  mb.targets.assign(begin + 1, begin + Tv + 1);
  mb.cu_seqlens = validation_cu_seqlens(mb.inputs, options_.cu_seqlens_rows);
  mb.max_seqlen = longest_segment(mb.cu_seqlens);
  mb.bigram_ids = bigram_row_ids(mb.inputs, options_.bigram_rows - 1);
  mb.sign_rows = bigram_sign_rows(mb.inputs);
  add_ngram_products(mb, options_.ngram_rows);
  mb.pieces = {{offset, offset + Tv + 1}};
  return mb;
}

}  // namespace gpt
