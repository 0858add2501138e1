// Long runs of one byte (issue: 100 MB of one character took 32–49 s and 2.36 GB): the run-length merge must give
// exactly the heap's (tiktoken's) tokens, and must not allocate per input byte.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/tokenizer/tokenizer_test_util.h"
#include "trainer/tokenizer/bpe.h"

namespace gpt {
namespace {

// The GPT-2 mergeable ranks as a RankTable (the tokenizer keeps its own private).
const RankTable& gpt2_ranks() {
  static const RankTable table = [] {
    RankTable t;
    const Gpt2Tokenizer& tok = testing::gpt2_tokenizer();
    for (int32_t id = 0; id < Gpt2Tokenizer::kMergeableTokens; ++id) t.insert(tok.token_bytes(id), id);
    return t;
  }();
  return table;
}

std::string repeat(std::string_view unit, size_t count) {
  std::string s;
  s.reserve(unit.size() * count);
  for (size_t i = 0; i < count; ++i) s += unit;
  return s;
}

std::vector<int32_t> by_heap(std::string_view unit, size_t count) {
  BpeScratch scratch;
  std::vector<int32_t> out;
  bpe_merge_heap(gpt2_ranks(), repeat(unit, count), scratch, out);
  return out;
}

// The run-length merge's tokens; an empty list when it declines the unit (its precondition does not hold).
std::vector<int32_t> by_runs(std::string_view unit, size_t count) {
  std::vector<int32_t> out;
  if (!bpe_merge_repeated_unit(gpt2_ranks(), unit, count, out)) {
    EXPECT_TRUE(out.empty());
  }
  return out;
}

TEST(RepeatedUnitMerge, EqualsTheHeapForEveryByteAndShortRuns) {
  for (int byte = 0; byte < 256; ++byte) {
    const std::string unit(1, static_cast<char>(byte));
    for (size_t n = 1; n <= 100; ++n) {
      ASSERT_EQ(by_runs(unit, n), by_heap(unit, n)) << "byte " << byte << " repeated " << n << " times";
    }
  }
}

TEST(RepeatedUnitMerge, EqualsTheHeapForMultiByteCharacters) {
  // Every 2-byte character and a sample of 3- and 4-byte ones: where the run-length merge accepts the unit, its
  // tokens equal the heap's.
  size_t accepted = 0;
  for (char32_t cp = 0x80; cp < 0x800; ++cp) {
    const std::string unit = testing::utf8(cp);
    for (const size_t n : {1u, 2u, 3u, 7u, 40u}) {
      const auto runs = by_runs(unit, n);
      if (runs.empty()) continue;
      ++accepted;
      ASSERT_EQ(runs, by_heap(unit, n)) << "U+" << std::hex << static_cast<uint32_t>(cp) << " x" << std::dec << n;
    }
  }
  for (const char32_t cp : {U'\u4e2d', U'\u00e9', U'\u2014', U'\u3042', U'\U0001F600', U'\U0001F44D'}) {
    const std::string unit = testing::utf8(cp);
    for (const size_t n : {1u, 5u, 64u, 1001u}) {
      const auto runs = by_runs(unit, n);
      if (!runs.empty()) {
        ASSERT_EQ(runs, by_heap(unit, n)) << "U+" << std::hex << static_cast<uint32_t>(cp);
      }
    }
  }
  EXPECT_GE(accepted, 500u);  // the 2-byte characters that are one GPT-2 token (630 cases when written)
}

TEST(RepeatedUnitMerge, EqualsTheHeapForLongRuns) {
  for (const char c : std::string("a x0!-=.\n\t")) {
    for (const size_t n : {1000u, 4097u, 65537u}) {
      const std::string unit(1, c);
      ASSERT_EQ(by_runs(unit, n), by_heap(unit, n)) << "byte " << int{static_cast<unsigned char>(c)} << " x" << n;
    }
  }
}

TEST(RepeatedUnitMerge, LongRunsNeedNoPerByteScratch) {
  // Before: a long run went through the heap, whose scratch holds ~28 bytes per input byte (2.36 GB for 100 MB).
  for (const std::string_view unit : {"a", "\n", "\u00e9"}) {
    const std::string run = repeat(unit, (1u << 18) / unit.size());
    BpeScratch scratch;
    std::vector<int32_t> out;
    bpe_encode_piece(gpt2_ranks(), run, scratch, out);
    EXPECT_LT(scratch.heap.capacity() + scratch.next.capacity() + scratch.pair_ranks.capacity(), 1024u) << unit;
    std::vector<int32_t> expected;
    bpe_merge_heap(gpt2_ranks(), run, scratch, expected);
    EXPECT_EQ(out, expected) << unit;
  }
}

TEST(RepeatedUnitMerge, TokenizerRoundTripsLongRuns) {
  const Gpt2Tokenizer& tok = testing::gpt2_tokenizer();
  for (const std::string unit : {"a", " ", "\n", "7", "é", "hello world "}) {
    std::string text;
    while (text.size() < 300000) text += unit;
    EXPECT_EQ(tok.decode(tok.encode_ordinary(text)), text) << "unit '" << unit << "'";
  }
}

}  // namespace
}  // namespace gpt
