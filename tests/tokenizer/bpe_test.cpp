#include "trainer/tokenizer/bpe.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "tests/tokenizer/tokenizer_test_util.h"

namespace gpt {
namespace {

// A toy vocabulary where the merge order is known by hand.
RankTable toy_ranks() {
  RankTable ranks;
  int32_t rank = 0;
  for (const char* bytes : {"a", "b", "c", "d"}) ranks.insert(bytes, rank++);  // 0..3
  ranks.insert("ab", 4);
  ranks.insert("bc", 5);
  ranks.insert("cd", 6);
  ranks.insert("aa", 7);
  ranks.insert("abc", 8);
  ranks.insert("aaaa", 9);
  return ranks;
}

using Ids = std::vector<int32_t>;

Ids merge(const RankTable& ranks, std::string_view piece, bool heap) {
  BpeScratch scratch;
  Ids out;
  if (heap) {
    bpe_merge_heap(ranks, piece, scratch, out);
  } else {
    bpe_merge_linear(ranks, piece, scratch, out);
  }
  return out;
}

TEST(RankTable, InsertFindAndBytes) {
  RankTable ranks = toy_ranks();
  EXPECT_EQ(ranks.size(), 10u);
  EXPECT_EQ(ranks.find("abc"), 8);
  EXPECT_EQ(ranks.find("b"), 1);
  EXPECT_EQ(ranks.find("abcd"), RankTable::kNotFound);
  EXPECT_EQ(ranks.find("x"), RankTable::kNotFound);
  EXPECT_EQ(ranks.bytes_of(9), "aaaa");
  EXPECT_FALSE(ranks.insert("ab", 12));  // duplicate bytes
  EXPECT_EQ(ranks.find("ab"), 4);
}

TEST(RankTable, GrowsPastItsInitialCapacity) {
  RankTable ranks;
  for (int32_t i = 0; i < 5000; ++i) ASSERT_TRUE(ranks.insert("k" + std::to_string(i), i));
  for (int32_t i = 0; i < 5000; ++i) ASSERT_EQ(ranks.find("k" + std::to_string(i)), i);
}

TEST(BpeMerge, LowestRankMergesFirst) {
  const RankTable ranks = toy_ranks();
  for (const bool heap : {false, true}) {
    EXPECT_EQ(merge(ranks, "abcd", heap), (Ids{4, 6})) << heap;   // ab(4) before bc(5), then cd(6)
    EXPECT_EQ(merge(ranks, "bcd", heap), (Ids{5, 3})) << heap;    // bc(5) before cd(6)
    EXPECT_EQ(merge(ranks, "abc", heap), (Ids{8})) << heap;       // ab(4), then ab+c = abc(8)
    EXPECT_EQ(merge(ranks, "aaa", heap), (Ids{7, 0})) << heap;    // ties go to the leftmost pair
    EXPECT_EQ(merge(ranks, "aaaaa", heap), (Ids{9, 0})) << heap;  // aa aa a -> aaaa a
    EXPECT_EQ(merge(ranks, "dcba", heap), (Ids{3, 2, 1, 0})) << heap;
  }
}

TEST(BpeMerge, StrategiesAgreeOnRealVocabulary) {
  const Gpt2Tokenizer& tok = testing::gpt2_tokenizer();
  RankTable ranks;
  for (int32_t id = 0; id < Gpt2Tokenizer::kEndOfText; ++id) ranks.insert(tok.token_bytes(id), id);
  std::mt19937 rng(11);
  const std::string alphabets[] = {"etaoinshrdlu", " \n", "abcdefghijklmnopqrstuvwxyz0123456789 .,'"};
  for (int trial = 0; trial < 1500; ++trial) {
    std::string piece(1 + rng() % 150, '\0');
    const std::string& alphabet = alphabets[trial % 3];
    for (char& c : piece) c = trial % 4 == 3 ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()];
    const Ids linear = merge(ranks, piece, false);
    ASSERT_EQ(merge(ranks, piece, true), linear) << ::testing::PrintToString(piece);
    BpeScratch scratch;
    Ids chosen;
    bpe_encode_piece(ranks, piece, scratch, chosen);
    ASSERT_EQ(chosen, linear);
  }
}

}  // namespace
}  // namespace gpt
