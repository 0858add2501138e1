#include "trainer/tokenizer/gpt2_tokenizer.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/check.h"
#include "base/file_read.h"
#include "trainer/comm/comm.h"
#include "trainer/tokenizer/pretokenizer.h"
#include "source_dir.h"

namespace gpt {
namespace {

constexpr std::string_view kFetchHint = "run scripts/fetch-tokenizer to install it";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with '=' padding; nullopt when text is not well-formed.
std::optional<std::string> decode_base64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  size_t padding = 0;
  while (padding < 2 && text[text.size() - 1 - padding] == '=') ++padding;
  std::string bytes;
  bytes.reserve(text.size() / 4 * 3);
  uint32_t buffer = 0;
  int bits = 0;
  for (size_t i = 0; i < text.size() - padding; ++i) {
    const int value = base64_value(text[i]);
    if (value < 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  if ((buffer & ((1u << bits) - 1)) != 0) return std::nullopt;  // non-canonical trailing bits
  return bytes;
}

std::string read_ranks_file(const std::filesystem::path& path) {
  std::optional<std::string> contents = try_read_file(path);
  GPT_CHECK(contents.has_value(), "cannot read GPT-2 ranks file ", path, " (", kFetchHint, ")");
  return std::move(*contents);
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::load(const std::filesystem::path& ranks_file) {
  const std::string contents = read_ranks_file(ranks_file);
  Gpt2Tokenizer tok;
  std::vector<bool> rank_seen(kMergeableTokens, false);
  size_t pos = 0;
  int64_t line_number = 0;
  while (pos < contents.size()) {
    ++line_number;
    const size_t newline = contents.find('\n', pos);
    const size_t line_end = newline == std::string::npos ? contents.size() : newline;
    const std::string_view line = std::string_view(contents).substr(pos, line_end - pos);
    pos = line_end + 1;
    const auto where = [&] {
      std::ostringstream os;
      os << ranks_file.string() << ":" << line_number << ": ";
      return os.str();
    };
    const size_t space = line.find(' ');
    GPT_CHECK(space != std::string_view::npos && line.find(' ', space + 1) == std::string_view::npos, where(),
              "expected 'base64 rank', got '", line.substr(0, 80), "'");
    const std::optional<std::string> bytes = decode_base64(line.substr(0, space));
    GPT_CHECK(bytes.has_value(), where(), "invalid base64 token bytes '", line.substr(0, space), "'");
    const std::string_view rank_text = line.substr(space + 1);
    int32_t rank = -1;
    const auto [rank_end, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    GPT_CHECK(
        ec == std::errc() && rank_end == rank_text.data() + rank_text.size() && rank >= 0 && rank < kMergeableTokens,
        where(), "rank must be an integer in [0, ", kMergeableTokens, "), got '", rank_text, "'");
    GPT_CHECK(!rank_seen[static_cast<size_t>(rank)], where(), "rank ", rank, " appears twice");
    rank_seen[static_cast<size_t>(rank)] = true;
    GPT_CHECK(tok.ranks_.insert(*bytes, rank), where(), "token bytes of rank ", rank, " appear twice");
  }
  GPT_CHECK(tok.ranks_.size() == static_cast<size_t>(kMergeableTokens), ranks_file.string(), ": expected ",
            kMergeableTokens, " tokens (ranks 0..", kMergeableTokens - 1, "), found ", tok.ranks_.size(),
            " (truncated or wrong file? ", kFetchHint, ")");
  for (int byte = 0; byte < 256; ++byte) {
    GPT_CHECK(tok.ranks_.byte_rank(static_cast<unsigned char>(byte)) != RankTable::kNotFound, ranks_file.string(),
              ": no token for the single byte ", byte, " (byte-level BPE needs all 256)");
  }
  return tok;
}

std::filesystem::path Gpt2Tokenizer::default_ranks_path() {
  const std::filesystem::path in_source =
      std::filesystem::path(SPEEDRUN_SOURCE_DIR) / "data" / "tokenizer" / "r50k_base.tiktoken";
  if (const char* env = std::getenv("SPEEDRUN_TOKENIZER"); env != nullptr && *env != '\0') {
    const std::filesystem::path from_env(env);
    GPT_CHECK(std::filesystem::is_regular_file(from_env), "GPT-2 ranks file not found: SPEEDRUN_TOKENIZER=", from_env,
              " does not exist (unset it to use ", in_source, ", or ", kFetchHint, ")");
    return from_env;
  }
  GPT_CHECK(std::filesystem::is_regular_file(in_source), "GPT-2 ranks file not found: SPEEDRUN_TOKENIZER is unset and ",
            in_source, " does not exist; ", kFetchHint, " (or set SPEEDRUN_TOKENIZER to the file)");
  return in_source;
}

Gpt2Tokenizer Gpt2Tokenizer::load_default() { return load(default_ranks_path()); }

void Gpt2Tokenizer::encode_ordinary_append(std::string_view utf8, std::vector<int32_t>& out) const {
  BpeScratch scratch;
  for_each_gpt2_piece(utf8, [&](std::string_view piece) { bpe_encode_piece(ranks_, piece, scratch, out); });
}

std::vector<int32_t> Gpt2Tokenizer::encode_ordinary(std::string_view utf8) const {
  std::vector<int32_t> ids;
  ids.reserve(utf8.size() / 3 + 1);
  encode_ordinary_append(utf8, ids);
  return ids;
}

std::string_view Gpt2Tokenizer::token_bytes(int32_t id) const {
  if (id == kEndOfText) return kEndOfTextText;
  GPT_CHECK(id >= 0 && id < kEndOfText, "GPT-2 token id ", id, " out of range [0, ", vocab_size(), ")");
  return ranks_.bytes_of(id);
}

std::optional<int32_t> Gpt2Tokenizer::find_token(std::string_view bytes) const {
  if (bytes.empty()) return std::nullopt;
  const int32_t rank = ranks_.find(bytes);
  if (rank == RankTable::kNotFound) return std::nullopt;
  return rank;
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    GPT_CHECK(id >= 0 && id < vocab_size(), "decode: token id ", id, " at position ", i, " out of range [0, ",
              vocab_size(), ")");
    text.append(token_bytes(id));
  }
  return text;
}

namespace {

// Longest-proper-prefix entries of the tokens that `in_set` accepts; the set must be closed under proper prefixes.
template <typename InSet>
std::vector<int64_t> prefix_table_of(const Gpt2Tokenizer& tok, int64_t padded_vocab, const char* what, InSet in_set) {
  GPT_CHECK(padded_vocab >= tok.vocab_size(), what, ": padded_vocab must be >= ", tok.vocab_size(), ", got ",
            padded_vocab);
  std::vector<int64_t> table(static_cast<size_t>(padded_vocab), -1);
  // In lexicographic order every token follows its prefixes, and the tokens that are prefixes of the
  // current one are exactly the chain kept on the stack; its top is the longest proper prefix.
  std::vector<int32_t> order;
  order.reserve(Gpt2Tokenizer::kMergeableTokens);
  for (int32_t id = 0; id < Gpt2Tokenizer::kMergeableTokens; ++id) {
    if (in_set(tok.token_bytes(id))) order.push_back(id);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return tok.token_bytes(a) < tok.token_bytes(b); });
  std::vector<int32_t> ancestors;
  for (const int32_t id : order) {
    const std::string_view bytes = tok.token_bytes(id);
    while (!ancestors.empty() && !bytes.starts_with(tok.token_bytes(ancestors.back()))) ancestors.pop_back();
    if (!ancestors.empty()) table[static_cast<size_t>(id)] = ancestors.back();
    ancestors.push_back(id);
  }
  return table;
}

}  // namespace

std::vector<int64_t> build_prefix_table(const Gpt2Tokenizer& tok, int64_t padded_vocab) {
  return prefix_table_of(tok, padded_vocab, "build_prefix_table", [](std::string_view) { return true; });
}

std::vector<int64_t> build_prefix_table_bucket(const Gpt2Tokenizer& tok, int rank, int world_size,
                                               int64_t padded_vocab) {
  GPT_CHECK(world_size >= 1 && rank >= 0 && rank < world_size,
            "build_prefix_table_bucket: need 0 <= rank < "
            "world_size, got rank ",
            rank, " of ", world_size);
  return prefix_table_of(tok, padded_vocab, "build_prefix_table_bucket", [&](std::string_view bytes) {
    return bytes.size() == 1 || static_cast<unsigned char>(bytes[1]) % world_size == rank;
  });
}

std::vector<int64_t> build_prefix_table_bucketed(const Gpt2Tokenizer& tok, Comm& comm, Device device,
                                                 int64_t padded_vocab) {
  const std::vector<int64_t> bucket = build_prefix_table_bucket(tok, comm.rank(), comm.world_size(), padded_vocab);
  Tensor host = Tensor::empty({padded_vocab}, DType::i64);
  std::memcpy(host.raw(), bucket.data(), bucket.size() * sizeof(int64_t));
  Tensor table = device == Device::cpu ? host : host.to(device);
  comm.all_reduce(table, ReduceOp::max);
  if (device != Device::cpu) host = table.to(Device::cpu);
  std::vector<int64_t> out(static_cast<size_t>(padded_vocab));
  std::memcpy(out.data(), host.raw(), out.size() * sizeof(int64_t));
  return out;
}

}  // namespace gpt
