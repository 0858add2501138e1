// RECIPE §S.7: the prefix table assembled from per-rank buckets equals the table built in one piece.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "base/check.h"
#include "tests/tokenizer/tokenizer_test_util.h"
#include "trainer/comm/comm.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"
#include "tests/common/thread_ranks.h"

namespace gpt {
namespace {

using testing::gpt2_tokenizer;

TEST(PrefixTableBucket, MaxMergeOfBucketsEqualsWholeTable) {
  const Gpt2Tokenizer& tok = gpt2_tokenizer();
  const std::vector<int64_t> whole = build_prefix_table(tok);
  for (const int world : {1, 2, 4, 8}) {
    std::vector<int64_t> merged(whole.size(), -1);
    int64_t entries = 0;
    for (int rank = 0; rank < world; ++rank) {
      const std::vector<int64_t> bucket = build_prefix_table_bucket(tok, rank, world);
      ASSERT_EQ(bucket.size(), whole.size());
      for (size_t t = 0; t < bucket.size(); ++t) {
        merged[t] = std::max(merged[t], bucket[t]);
        if (bucket[t] >= 0) {
          ++entries;
          // A bucket's entry is the whole table's and belongs to a token of that bucket.
          EXPECT_EQ(bucket[t], whole[t]) << "W=" << world << " rank " << rank << " token " << t;
          EXPECT_EQ(static_cast<unsigned char>(tok.token_bytes(static_cast<int32_t>(t))[1]) % world, rank) << t;
        }
      }
    }
    EXPECT_EQ(merged, whole) << "W=" << world;
    EXPECT_EQ(entries, 50000) << "W=" << world << ": every entry is built by exactly one rank";
  }
}

TEST(PrefixTableBucket, BucketsSplitTheWork) {
  // At W = 8 no rank builds more than a quarter of the 50,000 entries (the split is by second byte).
  const Gpt2Tokenizer& tok = gpt2_tokenizer();
  for (int rank = 0; rank < 8; ++rank) {
    const std::vector<int64_t> bucket = build_prefix_table_bucket(tok, rank, 8);
    const auto built = std::count_if(bucket.begin(), bucket.end(), [](int64_t p) { return p >= 0; });
    EXPECT_GT(built, 0) << rank;
    EXPECT_LT(built, 12500) << rank;
  }
}

TEST(PrefixTableBucket, RejectsABadRank) {
  EXPECT_THROW(build_prefix_table_bucket(gpt2_tokenizer(), 2, 2), Error);
  EXPECT_THROW(build_prefix_table_bucket(gpt2_tokenizer(), 0, 0), Error);
}

TEST(PrefixTableBucket, AllReduceOverTwoThreadRanks) {
  const Gpt2Tokenizer& tok = gpt2_tokenizer();
  const std::vector<int64_t> whole = build_prefix_table(tok);
  std::vector<std::vector<int64_t>> tables(2);
  test::run_thread_ranks(
      2, [&](int rank, Comm& comm) { tables[static_cast<size_t>(rank)] = build_prefix_table_bucketed(tok, comm); });
  EXPECT_EQ(tables[0], whole);
  EXPECT_EQ(tables[1], whole);
}

TEST(PrefixTableBucket, SingleRankCommIsTheWholeTable) {
  const auto comm = make_single_rank_comm();
  EXPECT_EQ(build_prefix_table_bucketed(gpt2_tokenizer(), *comm), build_prefix_table(gpt2_tokenizer()));
}

}  // namespace
}  // namespace gpt
