// Tokenizer: encode_ordinary on any bytes, decode(encode(s)) == s (the documented round trip, which for valid
// UTF-8 input is the tiktoken property), every id a mergeable token; decode of arbitrary ids (the input read as
// little-endian int32) either succeeds with the concatenated token bytes or rejects an out-of-range id.
#include <cstring>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"

namespace {

const gpt::Gpt2Tokenizer& tokenizer() {
  static const gpt::Gpt2Tokenizer tok = gpt::Gpt2Tokenizer::load_default();
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gpt::fuzz::require;
  const gpt::Gpt2Tokenizer& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const std::vector<int32_t> ids = tok.encode_ordinary(text);
  for (const int32_t id : ids) require(id >= 0 && id < gpt::Gpt2Tokenizer::kMergeableTokens, "encode id range");
  require(ids.size() <= text.size(), "at most one token per byte");
  require(tok.decode(ids) == text, "decode(encode(s)) == s");

  std::vector<int32_t> raw(size / sizeof(int32_t));
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * sizeof(int32_t));
  bool in_range = true;
  size_t expected_bytes = 0;
  for (const int32_t id : raw) {
    in_range = in_range && id >= 0 && id < tok.vocab_size();
    if (in_range) expected_bytes += tok.token_bytes(id).size();
  }
  try {
    const std::string decoded = tok.decode(raw);
    require(in_range && decoded.size() == expected_bytes, "decode of in-range ids");
  } catch (const gpt::Error&) {
    require(!in_range, "decode rejects only out-of-range ids");
  }
  return 0;
}
