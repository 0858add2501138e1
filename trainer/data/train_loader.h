#pragma once
// BOS-aligned training loader (RECIPE §1.3–§1.5). One loader call plans all slices of the call (8 for the
// reference, 1 for `tiny`/`mini`) from the current shard's BOS index, so the token stream is the same for every
// world size; each rank then materializes only its own slices (slice k -> rank k mod W, microbatch ⌊k/W⌋).
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainer/data/host_products.h"
#include "trainer/data/shard.h"

namespace gpt {

// One call's geometry; it changes with the stage (§1.6).
struct CallShape {
  std::int64_t slice_tokens = 0;     // T
  std::int64_t max_doc_tokens = 0;   // Lmax: a document keeps only its first Lmax tokens
  std::int32_t cu_seqlens_rows = 0;  // R; 0 = default_cu_seqlens_rows(T)
  std::int64_t segment_cap = 0;      // §S.1 attention segment cap; 0 = none
  friend bool operator==(const CallShape&, const CallShape&) = default;
};

// A contiguous run [begin, end) of shard tokens starting at a BOS.
struct Piece {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t length() const { return end - begin; }
  friend bool operator==(const Piece&, const Piece&) = default;
};

// The pieces of one slice; their lengths sum to T + 1.
using SlicePlan = std::vector<Piece>;

// Plans `slices` slices of T tokens starting at BOS index `cursor` (§1.3 piece rule). Returns the plans and
// advances `cursor`, or returns nullopt (cursor unchanged) when the shard runs out of BOS positions first.
std::optional<std::vector<SlicePlan>> plan_call(std::span<const std::int64_t> bos, std::int64_t shard_tokens,
                                                std::int64_t& cursor, int slices, std::int64_t slice_tokens,
                                                std::int64_t max_doc_tokens);

// Everything the model needs for one microbatch on one rank (§1.5).
struct Microbatch {
  int slice = 0;                         // k within the call
  int microbatch = 0;                    // ⌊k/W⌋: order of gradient accumulation on this rank
  std::vector<std::int32_t> inputs;      // [T]
  std::vector<std::int64_t> targets;     // [T]
  std::vector<std::int32_t> cu_seqlens;  // [R]
  std::vector<std::int32_t> bigram_ids;  // [T]
  std::vector<std::int32_t> sign_rows;   // [T]
  // §S.2 hashed n-gram table (only when the loader's ngram_rows > 0, else empty): bigram then trigram row ids and
  // their sign-pool rows.
  std::vector<std::int32_t> ngram_rows;       // [2T]
  std::vector<std::int32_t> ngram_sign_rows;  // [2T]
  std::int32_t max_seqlen = 0;                // longest segment in cu_seqlens
  std::int64_t shard_index = 0;               // provenance: which shard and which pieces of it
  SlicePlan pieces;
};

// Builds a microbatch from a slice plan over `tokens` (the shard the plan was made on).
// `ngram_rows` > 0 adds the §S.2 n-gram row ids and sign rows for a table of that many rows.
Microbatch materialize_slice(std::span<const std::uint16_t> tokens, const SlicePlan& plan, const CallShape& shape,
                             std::int32_t bigram_rows, std::int64_t ngram_rows = 0);

// Fills batch.ngram_rows / ngram_sign_rows from batch.inputs (§S.2) for a table of `ngram_rows` rows; no-op at 0.
void add_ngram_products(Microbatch& batch, std::int64_t ngram_rows);

// Where the loader stands: the next call starts at BOS number `cursor` of shard `shard_index`, in pass `pass` over
// the shard list (0 unless the loader cycles the shards).
struct LoaderPosition {
  std::int64_t shard_index = 0;
  std::int64_t cursor = 0;
  std::int64_t pass = 0;
  friend bool operator==(const LoaderPosition&, const LoaderPosition&) = default;
};
void to_json(nlohmann::json& j, const LoaderPosition& position);
void from_json(const nlohmann::json& j, LoaderPosition& position);

struct TrainLoaderOptions {
  std::vector<std::filesystem::path> shards;  // consumed in this order, once (or cyclically, below)
  bool cycle_shards = false;                  // restart from the first shard when the last runs out
  int slices_per_call = 8;                    // 8 (reference), 1 (tiny/mini)
  int world_size = 1;                         // W in {1, 2, 4, 8}; must divide slices_per_call
  int rank = 0;
  std::int32_t bigram_rows = kHeadBigramRows;  // M = bigram_rows - 1
  std::int64_t ngram_rows = 0;                 // §S.2 n-gram table rows (0 = off: no n-gram products)
  bool prefetch = true;                        // open the next shard on a background thread
  ShardOpenOptions open{};
};

class TrainLoader {
 public:
  explicit TrainLoader(TrainLoaderOptions options, LoaderPosition start = {});
  TrainLoader(const TrainLoader&) = delete;
  TrainLoader& operator=(const TrainLoader&) = delete;
  TrainLoader(TrainLoader&&) noexcept;
  TrainLoader& operator=(TrainLoader&&) noexcept;
  ~TrainLoader();

  // Plans the next call (switching shards and redoing the call when a shard runs out) and returns this rank's
  // microbatches in accumulation order. Throws when the last shard runs out (unless cycling), or when no shard holds
  // one whole call.
  std::vector<Microbatch> next(const CallShape& shape);

  LoaderPosition position() const { return position_; }
  // Passes begun over the shard list: 1 until the loader first wraps to the first shard again.
  std::int64_t passes_begun() const { return position_.pass + 1; }
  // Jumps to a saved position (checkpoint resume).
  void seek(LoaderPosition position);

  const std::filesystem::path& current_shard_path() const;
  int microbatches_per_call() const { return options_.slices_per_call / options_.world_size; }

 private:
  struct LoadedShard;
  static std::unique_ptr<LoadedShard> open_indexed(std::int64_t index, std::filesystem::path path,
                                                   ShardOpenOptions open);
  void load(std::int64_t shard_index);
  void start_prefetch(std::int64_t shard_index);
  std::int64_t shard_after(std::int64_t shard_index) const;

  TrainLoaderOptions options_;
  LoaderPosition position_;
  std::unique_ptr<LoadedShard> current_;
  std::int64_t prefetch_index_ = -1;
  std::future<std::unique_ptr<LoadedShard>> prefetch_;
};

}  // namespace gpt
