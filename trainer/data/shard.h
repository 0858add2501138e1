#pragma once
// Token shards (RECIPE §1.1): a 256×int32 little-endian header (20240520, 1, N, zeros) followed by N uint16
// GPT-2 token ids. Plain `.bin` files are read into memory whole; `.bin.zst` files are decompressed into memory.
// Every defect is reported as a one-line gpt::Error naming the file and the problem.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpt {

inline constexpr std::int32_t kShardMagic = 20240520;
inline constexpr std::int32_t kShardVersion = 1;
inline constexpr std::size_t kShardHeaderInts = 256;
inline constexpr std::size_t kShardHeaderBytes = kShardHeaderInts * sizeof(std::int32_t);
// GPT-2 ids are < 50257; 50256 (<|endoftext|>) doubles as the BOS that starts every document (§1.2).
inline constexpr std::uint16_t kBosToken = 50256;
inline constexpr std::uint32_t kTokenIdLimit = 50257;

struct ShardOpenOptions {
  // Scan every token for ids >= 50257 (one linear pass; ~tens of ms per 10^8 tokens).
  bool check_token_ids = true;
};

// A read-only shard. Move-only; its tokens live exactly as long as the object.
class Shard {
 public:
  static Shard open(const std::filesystem::path& path, const ShardOpenOptions& options = {});

  Shard(Shard&&) noexcept;
  Shard& operator=(Shard&&) noexcept;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;
  ~Shard();

  std::span<const std::uint16_t> tokens() const { return tokens_; }
  std::size_t size() const { return tokens_.size(); }
  const std::filesystem::path& path() const { return path_; }
  bool compressed() const { return compressed_; }

 private:
  Shard() = default;
  std::filesystem::path path_;
  std::vector<std::uint16_t> owned_;  // the tokens, read whole when opened (never mapped: see shard.cpp)
  std::span<const std::uint16_t> tokens_;
  bool compressed_ = false;
};

// Positions of every BOS (50256) in `tokens`, ascending: the full document index of a shard (§1.3).
std::vector<std::int64_t> bos_positions(std::span<const std::uint16_t> tokens);

struct ShardWriteOptions {
  // Compress with zstd at this level when the target path ends in ".zst" (ignored otherwise).
  int zstd_level = 3;
};

// Writes a shard atomically: the bytes go to a temporary file beside `path`, which is renamed onto `path`
// only once complete, so readers never see a partial shard. Rejects ids >= 50257 and more than 2^31-1 tokens.
void write_shard(const std::filesystem::path& path, std::span<const std::uint16_t> tokens,
                 const ShardWriteOptions& options = {});

// Shard files in `dir` whose file name matches `pattern` (fnmatch syntax: `*`, `?`, `[...]`), in
// lexicographic order of file name. Only names ending in ".bin" or ".bin.zst" are considered and the pattern is
// matched against the name without ".zst"; a pattern without wildcards is a prefix ("train_" = "train_*").
// When both "x.bin" and "x.bin.zst" exist, "x.bin" is taken. Throws if `dir` is not a readable directory.
std::vector<std::filesystem::path> list_shards(const std::filesystem::path& dir, std::string_view pattern);

enum class ShardSplit { train, val };

// Start-up check of one corpus shard of `split`: it must hold tokens and at least one BOS (documents start at BOS,
// §1.2), or the loaders would fail mid-run ("training data exhausted") or validate on windows without documents.
// Throws naming the shard.
void check_corpus_shard(const Shard& shard, ShardSplit split);

// The shards of one split in `dir`: FineWeb names (`fineweb_train_*`, `fineweb_val_*`) when present,
// otherwise the project's corpus names (`train_*`, `val_*`). Throws naming `dir` when neither exists.
std::vector<std::filesystem::path> find_split_shards(const std::filesystem::path& dir, ShardSplit split);

}  // namespace gpt
