#pragma once
// GPT-2 byte-level BPE tokenizer, identical to tiktoken's `gpt2` encoding (encode_ordinary / decode).
//
// Ranks come from r50k_base.tiktoken (one "base64(token bytes) rank" line per token, ranks 0..50255;
// installed by scripts/fetch-tokenizer). <|endoftext|> = 50256 is added here and never produced by
// encode_ordinary: the literal text "<|endoftext|>" is encoded as ordinary text.
// Input need not be valid UTF-8: see unicode_class.h for how invalid bytes are treated; every byte
// string satisfies decode(encode_ordinary(s)) == s.
// A loaded tokenizer is immutable; its const methods may be called from several threads at once.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/tensor.h"
#include "trainer/tokenizer/bpe.h"

namespace gpt {

class Comm;

class Gpt2Tokenizer {
 public:
  static constexpr int32_t kEndOfText = 50256;
  static constexpr int32_t kMergeableTokens = 50256;  // ranks in the ranks file
  static constexpr std::string_view kEndOfTextText = "<|endoftext|>";

  // Reads and validates a ranks file; throws gpt::Error naming the file and line of any defect.
  static Gpt2Tokenizer load(const std::filesystem::path& ranks_file);
  static Gpt2Tokenizer load_default();  // load(default_ranks_path())
  // $SPEEDRUN_TOKENIZER if set, else <source dir>/data/tokenizer/r50k_base.tiktoken; throws gpt::Error
  // naming both places and scripts/fetch-tokenizer when the chosen file does not exist.
  static std::filesystem::path default_ranks_path();

  std::vector<int32_t> encode_ordinary(std::string_view utf8) const;
  void encode_ordinary_append(std::string_view utf8, std::vector<int32_t>& out) const;
  // Concatenated token bytes (may be invalid UTF-8); throws gpt::Error for an id outside [0, vocab_size()).
  std::string decode(std::span<const int32_t> ids) const;
  std::string_view token_bytes(int32_t id) const;  // kEndOfText -> "<|endoftext|>"
  // Id of the mergeable token with exactly these bytes, if any (never kEndOfText).
  std::optional<int32_t> find_token(std::string_view bytes) const;
  int32_t vocab_size() const { return kMergeableTokens + 1; }  // 50257

 private:
  Gpt2Tokenizer() = default;
  RankTable ranks_;
};

// RECIPE §3.2 prefix table of size padded_vocab: entry t is the id of the token whose bytes are the longest
// proper prefix of token t's bytes, -1 if there is none (1-byte tokens, <|endoftext|>, padding ids).
std::vector<int64_t> build_prefix_table(const Gpt2Tokenizer& tok, int64_t padded_vocab = 50304);

// RECIPE §S.7 bucket `rank` of `world_size`: the entries of the tokens whose byte string has length 1 or whose second
// byte ≡ rank (mod world_size); every other entry is −1. A bucket is closed under proper prefixes (a prefix of two
// or more bytes has the same second byte; one-byte tokens are in every bucket and map to −1), so the element-wise
// max over the world_size buckets equals build_prefix_table.
std::vector<int64_t> build_prefix_table_bucket(const Gpt2Tokenizer& tok, int rank, int world_size,
                                               int64_t padded_vocab = 50304);

// §S.7 on the clock: every rank of `comm` calls this collectively; each builds its own bucket and an all-reduce(MAX)
// of an i64 [padded_vocab] tensor on `device` (the communicator's device: CUDA for NCCL) assembles the table, which
// is returned on the host (the host copy also feeds the sampled softmax, §S.4).
std::vector<int64_t> build_prefix_table_bucketed(const Gpt2Tokenizer& tok, Comm& comm, Device device = Device::cpu,
                                                 int64_t padded_vocab = 50304);

}  // namespace gpt
