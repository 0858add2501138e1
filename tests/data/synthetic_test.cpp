// Synthetic `tiny` corpus (RECIPE §R.1). Expected values come from an independent Python model of the rule
// documented in trainer/data/synthetic.h.
#include "trainer/data/synthetic.h"

#include <gtest/gtest.h>

#include <numeric>

#include "base/check.h"
#include "tests/data/data_test_util.h"
#include "trainer/data/shard.h"

namespace gpt {
namespace {

using U16 = std::vector<std::uint16_t>;

std::uint64_t sum_mod(const U16& tokens, std::uint64_t m) {
  return std::accumulate(tokens.begin(), tokens.end(), std::uint64_t{0}) % m;
}

TEST(XorShift64Star, FirstOutputsForSeed1234) {
  XorShift64Star rng(1234);
  EXPECT_EQ(rng.next(), 13571057368034195726ULL);
  EXPECT_EQ(rng.next(), 5609927630774915935ULL);
  EXPECT_EQ(rng.next(), 7579251470305882622ULL);
  EXPECT_EQ(rng.next(), 5983710364178522203ULL);
  EXPECT_THROW(XorShift64Star(0), Error);
}

TEST(SyntheticCorpus, MatchesIndependentModel) {
  const SyntheticCorpus corpus = make_synthetic_corpus();
  ASSERT_EQ(corpus.train.size(), 2'000'000u);
  ASSERT_EQ(corpus.val.size(), 100'000u);
  EXPECT_EQ(U16(corpus.train.begin(), corpus.train.begin() + 12),
            (U16{50256, 17071, 7597, 36014, 41413, 8438, 24492, 48503, 20398, 24742, 27450, 46073}));
  EXPECT_EQ(U16(corpus.val.begin(), corpus.val.begin() + 12),
            (U16{50256, 46432, 5521, 31051, 2254, 29844, 15198, 29107, 15574, 33598, 41014, 48937}));
  EXPECT_EQ(std::count(corpus.train.begin(), corpus.train.end(), kBosToken), 7611);
  EXPECT_EQ(std::count(corpus.val.begin(), corpus.val.end(), kBosToken), 374);
  EXPECT_EQ(sum_mod(corpus.train, 1000003), 540499u);
  EXPECT_EQ(sum_mod(corpus.val, 1000003), 112765u);
}

TEST(SyntheticCorpus, DocumentsFollowTheRule) {
  XorShift64Star rng(99);
  const U16 tokens = synthetic_documents(rng, 200'000);
  const auto bos = bos_positions(tokens);
  ASSERT_GT(bos.size(), 300u);
  EXPECT_EQ(bos[0], 0);
  std::int64_t ruled = 0, transitions = 0;
  for (std::size_t d = 0; d + 1 < bos.size(); ++d) {
    const std::int64_t length = bos[d + 1] - bos[d];
    EXPECT_GE(length, 16);
    EXPECT_LE(length, 512);
    for (std::int64_t t = bos[d] + 2; t < bos[d + 1]; ++t) {
      const std::uint64_t prev = tokens[static_cast<std::size_t>(t - 1)];
      const std::uint64_t next = tokens[static_cast<std::size_t>(t)];
      bool follows = false;
      for (std::uint64_t k = 0; k < 4; ++k) follows |= (40503 * prev + 977 * k + 1) % 50256 == next;
      ruled += follows;
      ++transitions;
    }
  }
  // 3/4 by the rule plus a 4/50256 chance that a uniform draw matches it.
  const double fraction = static_cast<double>(ruled) / static_cast<double>(transitions);
  EXPECT_NEAR(fraction, 0.75, 0.01);
}

TEST(SyntheticCorpus, SmallCountsAndCut) {
  XorShift64Star rng(5);
  EXPECT_TRUE(synthetic_documents(rng, 0).empty());
  const U16 three = synthetic_documents(rng, 3);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0], kBosToken);
  EXPECT_THROW((void)synthetic_documents(rng, -1), Error);
}

TEST(SyntheticCorpus, WritesReadableDeterministicShards) {
  test::ScratchDir dir;
  const SyntheticCorpusOptions options{.seed = 1234, .train_tokens = 5000, .val_tokens = 700};
  const auto paths = write_synthetic_corpus(dir / "tiny", options);
  ASSERT_EQ(paths.size(), 2u);
  const Shard train = Shard::open(paths[0]);
  const Shard val = Shard::open(paths[1]);
  EXPECT_EQ(train.size(), 5000u);
  EXPECT_EQ(val.size(), 700u);
  EXPECT_EQ(find_split_shards(dir / "tiny", ShardSplit::train), std::vector{paths[0]});
  // The prefix of the full-size corpus: same generator, same first documents.
  const SyntheticCorpus full = make_synthetic_corpus();
  EXPECT_TRUE(std::equal(train.tokens().begin(), train.tokens().end(), full.train.begin()));
}

}  // namespace
}  // namespace gpt
