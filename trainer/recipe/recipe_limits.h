#pragma once
// Internal to trainer/recipe: upper bounds of the sizes and counts (far above any real recipe). They keep every
// product the trainer forms (tensor shapes, window × block, batch × steps, offsets) inside int64 and its allocations
// finite, so a mistyped value is an error naming its key instead of an overflow, a crash or std::bad_alloc.
#include <cstddef>
#include <cstdint>

namespace gpt::recipe_limits {

constexpr int64_t kMaxWidth = int64_t{1} << 14;   // model_dim, head_dim
constexpr int64_t kMaxHidden = int64_t{1} << 16;  // mlp_hidden, mudd_hidden
constexpr int64_t kMaxHeads = int64_t{1} << 10;
constexpr int64_t kMaxVocab = int64_t{1} << 17;  // token ids are 16-bit; padding beyond is useless
constexpr int64_t kMaxBigramRows = int64_t{1} << 24;
constexpr int64_t kMaxMatrixElements = int64_t{1} << 32;  // one weight matrix: 8 GiB in bf16
constexpr int64_t kMaxSteps = int64_t{1} << 30;           // per key; scheduled + extension < 2^31
constexpr int64_t kMaxTokens = int64_t{1} << 30;          // batch_tokens, lmax, validation.batch_tokens
constexpr int64_t kMaxValidationTokens = int64_t{1} << 40;
constexpr int64_t kMaxBlocks = int64_t{1} << 16;  // window_block and windows in blocks
constexpr int64_t kMaxRows = int64_t{1} << 24;    // validation.cu_rows
constexpr size_t kMaxStages = 64;
constexpr size_t kMaxMtpWeights = 64;
constexpr size_t kMaxStepParts = 64;  // entries of a stage's prefix_steps / sampled_softmax
// §S.4: P is a multiple of 2048 [NR]; the scaled-down recipes keep that rule (tiny-ext uses 2048 and 4096).
constexpr int64_t kSampledSoftmaxQuantum = 2048;
// Row ids are int32 (§S.2): the largest id, ngram_rows − 1, must fit. 2^30 also keeps every shard offset small.
constexpr int64_t kMaxNgramRows = int64_t{1} << 30;
constexpr int64_t kMaxCacheRows = int64_t{1} << 30;

}  // namespace gpt::recipe_limits
