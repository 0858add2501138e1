#pragma once
// Turns tokenized documents into train/validation shards (docs/CORPUS.md steps 4–5): each document becomes
// [50256] + tokens, goes to validation when its name hashes into the validation bucket, and shards are cut at
// exactly `shard_tokens` tokens (a document may continue into the next shard, as in FineWeb).
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpt {

// Which documents are validation documents, decided from the document name alone (stable across runs).
struct SplitRule {
  std::uint64_t modulus = 50;  // validation when sha1(name) mod modulus == 0 (docs/CORPUS.md: 50, ≈2%)
  double val_fraction = -1.0;  // when in [0, 1]: validation when sha1(name) mod 10^6 < fraction·10^6 instead
  bool is_validation(std::string_view name) const;
  std::string describe() const;
};

struct CorpusBuilderOptions {
  std::filesystem::path out_dir;
  std::int64_t shard_tokens = 100'000'000;
  SplitRule split{};
  bool compress = false;  // write .bin.zst instead of .bin
  // When set, training documents are held until finish() and written in an order drawn from this seed, so a
  // corpus built source by source reads as a mixture (FineWeb's shards are shuffled; a loader reading sources one
  // after another trains on one kind of text for many steps). Validation documents keep their order.
  std::optional<std::uint64_t> shuffle_seed = std::nullopt;
};

// The order finish() writes `count` held documents in for `seed`: a Fisher–Yates permutation driven by
// SplitMix64 with rejection sampling, defined here so a corpus is the same on every platform and library.
std::vector<std::size_t> shuffled_document_order(std::size_t count, std::uint64_t seed);

struct SplitCounts {
  std::int64_t documents = 0;
  std::int64_t tokens = 0;  // BOS included
};

class CorpusBuilder {
 public:
  explicit CorpusBuilder(CorpusBuilderOptions options);

  // Adds one document (BOS is prepended here). `source` groups documents in the report.
  void add_document(std::string_view source, std::string_view name, std::span<const std::int32_t> tokens);
  // Counts a document that was dropped (empty text) in the report.
  void skip_document(std::string_view source);

  // Writes the remaining tokens, deletes shards of an earlier run that this run did not rewrite, writes
  // `out_dir`/report.json and returns the report.
  nlohmann::json finish();

 private:
  struct SplitState {
    std::string prefix;  // "train" or "val"
    std::vector<std::uint16_t> pending;
    std::vector<std::string> written;
    SplitCounts counts;
  };
  struct SourceCounts {
    SplitCounts train, val;
    std::int64_t skipped = 0;
  };
  void flush(SplitState& split, bool final);

  CorpusBuilderOptions options_;
  SplitState train_{"train", {}, {}, {}};
  SplitState val_{"val", {}, {}, {}};
  std::vector<std::vector<std::uint16_t>> held_train_;  // documents (BOS first) awaiting the shuffled write
  std::vector<std::string> source_order_;
  std::map<std::string, SourceCounts, std::less<>> sources_;
  bool finished_ = false;
};

}  // namespace gpt
