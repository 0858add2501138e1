#include <gtest/gtest.h>

#include <algorithm>

#include "base/check.h"
#include "tests/tokenizer/tokenizer_test_util.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"

namespace gpt {
namespace {

using testing::gpt2_tokenizer;

const std::vector<int64_t>& prefix_table() {
  static const std::vector<int64_t> table = build_prefix_table(gpt2_tokenizer());
  return table;
}

TEST(PrefixTable, RecipeCheckValues) {
  const auto& table = prefix_table();
  ASSERT_EQ(table.size(), 50304u);
  EXPECT_EQ(table[262], 294);  // " the" -> " th"
  EXPECT_EQ(table[290], 281);  // " and" -> " an"
  EXPECT_EQ(table[256], 220);  // " t" -> " "
  EXPECT_EQ(table[11], -1);    // "," has no proper prefix
}

TEST(PrefixTable, ExactlyFiftyThousandTokensHaveAPrefix) {
  const auto& table = prefix_table();
  EXPECT_EQ(std::count_if(table.begin(), table.end(), [](int64_t p) { return p >= 0; }), 50000);
}

TEST(PrefixTable, EndOfTextAndPaddingHaveNone) {
  const auto& table = prefix_table();
  for (size_t id = Gpt2Tokenizer::kEndOfText; id < table.size(); ++id) EXPECT_EQ(table[id], -1) << id;
}

TEST(PrefixTable, MatchesLongestProperPrefixByDirectLookup) {
  // Independent of the sorted-stack construction: try every shorter prefix, longest first.
  const Gpt2Tokenizer& tok = gpt2_tokenizer();
  const auto& table = prefix_table();
  for (int32_t id = 0; id < Gpt2Tokenizer::kEndOfText; ++id) {
    const std::string_view bytes = tok.token_bytes(id);
    int64_t expected = -1;
    for (size_t length = bytes.size() - 1; length >= 1 && expected < 0; --length) {
      if (const auto prefix = tok.find_token(bytes.substr(0, length))) expected = *prefix;
    }
    ASSERT_EQ(table[static_cast<size_t>(id)], expected) << "token " << id;
  }
}

TEST(PrefixTable, PaddedSizeIsChecked) {
  EXPECT_EQ(build_prefix_table(gpt2_tokenizer(), 50257).size(), 50257u);
  EXPECT_THROW((void)build_prefix_table(gpt2_tokenizer(), 50000), Error);
}

}  // namespace
}  // namespace gpt
