#pragma once
// What a run trained on, recorded in its checkpoints so that `--resume` with other data is refused: every train
// and validation shard's file name, byte size and token count, folded into one digest (FNV-1a 64), plus counts
// for the message. A resumed run must read the same corpus, or its validation history mixes two corpora.
#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "base/fnv1a.h"

namespace gpt {

struct CorpusFingerprint {
  std::string dir;  // --data as given (for messages; the digest does not depend on where the folder is)
  std::int64_t shards = 0;
  std::int64_t tokens = 0;
  std::uint64_t digest = kFnv1a64OffsetBasis;  // no shard yet

  // Folds in one shard (its file name, size on disk and token count), in the order the loaders read them.
  void add_shard(const std::filesystem::path& path, std::int64_t token_count);
  bool same_data(const CorpusFingerprint& other) const {
    return digest == other.digest && shards == other.shards && tokens == other.tokens;
  }
  // 'data/default' (3 shards, 2370176 tokens, fingerprint 0123456789abcdef)
  std::string describe() const;

  nlohmann::json to_json() const;
  // Throws gpt::Error naming `source` when a field is missing or mistyped.
  static CorpusFingerprint from_json(const nlohmann::json& j, const std::string& source);
};

}  // namespace gpt
