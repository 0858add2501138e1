// SHA-1 split hash (published FIPS vectors, values from Python hashlib) and the document -> shard builder.
#include "trainer/data/corpus_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "base/check.h"
#include "tests/data/data_test_util.h"
#include "trainer/data/sha1.h"
#include "trainer/data/shard.h"

namespace gpt {
namespace {

using test::ScratchDir;
using U16 = std::vector<std::uint16_t>;

TEST(Sha1, PublishedVectors) {
  EXPECT_EQ(to_hex(sha1("")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(to_hex(sha1("abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(to_hex(sha1(std::string(1'000'000, 'a'))), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  EXPECT_EQ(to_hex(sha1("The quick brown fox jumps over the lazy dog")), "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12");
}

TEST(Sha1, PaddingBoundaries) {
  // 55, 56 and 64 bytes: the length field fits the last block, spills into a new one, or needs a full block.
  EXPECT_EQ(to_hex(sha1(std::string(55, 'a'))), "c1c8bbdc22796e28c0e15163d20899b65621d65a");
  EXPECT_EQ(to_hex(sha1(std::string(56, 'a'))), "c2db330f6083854c99d4b5bfb6e8f29f201be699");
  EXPECT_EQ(to_hex(sha1(std::string(64, 'a'))), "0098ba824b5c16427bd7a1122a5a442a25ec644d");
}

TEST(Sha1, DigestModMatchesPythonBigInteger) {
  // int(hashlib.sha1(s).hexdigest(), 16) % m
  EXPECT_EQ(digest_mod(sha1(""), 50), 5u);
  EXPECT_EQ(digest_mod(sha1("abc"), 50), 17u);
  EXPECT_EQ(digest_mod(sha1("abc"), 1'000'000), 479517u);
  EXPECT_EQ(digest_mod(sha1("sotu/1790-01-08-Washington"), 50), 47u);
  EXPECT_EQ(digest_mod(sha1("moby-dick/chapter-001"), 1'000'000), 500207u);
  EXPECT_THROW((void)digest_mod(sha1(""), 0), Error);
}

TEST(SplitRule, ModulusAndFraction) {
  const SplitRule by_50{};
  EXPECT_FALSE(by_50.is_validation("abc"));  // 17
  EXPECT_TRUE(by_50.is_validation("doc8"));  // 0
  const SplitRule by_3{.modulus = 3};
  EXPECT_TRUE(by_3.is_validation("b"));   // sha1 mod 3 == 0
  EXPECT_FALSE(by_3.is_validation("a"));  // 1
  const SplitRule half{.val_fraction = 0.5};
  EXPECT_TRUE(half.is_validation("abc"));                     // 479517 < 500000
  EXPECT_FALSE(half.is_validation("moby-dick/chapter-001"));  // 500207
  EXPECT_TRUE(SplitRule{.val_fraction = 1.0}.is_validation("anything"));
  EXPECT_FALSE(SplitRule{.val_fraction = 0.0}.is_validation(""));
}

TEST(CorpusBuilder, CutsShardsExactlyAndPrependsBos) {
  ScratchDir dir;
  CorpusBuilder builder({.out_dir = dir.path(), .shard_tokens = 4, .split = {.val_fraction = 0.0}});
  builder.add_document("src", "a", std::vector<std::int32_t>{1, 2});
  builder.add_document("src", "b", std::vector<std::int32_t>{3, 4, 5});
  builder.add_document("src", "c", std::vector<std::int32_t>{});
  const auto report = builder.finish();
  // Stream: BOS 1 2 BOS 3 4 5 BOS -> shards of 4, 4 (a document continues into the next shard).
  const auto train = find_split_shards(dir.path(), ShardSplit::train);
  ASSERT_EQ(train.size(), 2u);
  EXPECT_TRUE(std::ranges::equal(Shard::open(train[0]).tokens(), U16{50256, 1, 2, 50256}));
  EXPECT_TRUE(std::ranges::equal(Shard::open(train[1]).tokens(), U16{3, 4, 5, 50256}));
  EXPECT_EQ(report["train"]["tokens"], 8);
  EXPECT_EQ(report["train"]["documents"], 3);
  EXPECT_EQ(report["val"]["documents"], 0);
  EXPECT_TRUE(report["val"]["shards"].empty());
  EXPECT_TRUE(std::filesystem::exists(dir / "report.json"));
}

TEST(CorpusBuilder, SplitsByNameAndReportsPerSource) {
  ScratchDir dir;
  CorpusBuilder builder({.out_dir = dir.path(), .split = {.val_fraction = 0.5}});
  builder.add_document("novel", "abc", std::vector<std::int32_t>{7, 8});                     // val
  builder.add_document("novel", "moby-dick/chapter-001", std::vector<std::int32_t>{9});      // train
  builder.add_document("speeches", "moby-dick/chapter-001", std::vector<std::int32_t>{10});  // train
  builder.skip_document("speeches");
  const auto report = builder.finish();
  EXPECT_TRUE(std::ranges::equal(Shard::open(dir / "val_000000.bin").tokens(), U16{50256, 7, 8}));
  EXPECT_TRUE(std::ranges::equal(Shard::open(dir / "train_000000.bin").tokens(), U16{50256, 9, 50256, 10}));
  ASSERT_EQ(report["sources"].size(), 2u);
  EXPECT_EQ(report["sources"][0]["source"], "novel");
  EXPECT_EQ(report["sources"][0]["documents"], 2);
  EXPECT_EQ(report["sources"][0]["tokens"], 5);
  EXPECT_EQ(report["sources"][0]["val"]["tokens"], 3);
  EXPECT_EQ(report["sources"][1]["skipped_empty"], 1);
  std::ifstream in(dir / "report.json");
  EXPECT_EQ(nlohmann::json::parse(in), report);
}

TEST(CorpusBuilder, ShuffleOrderIsAPermutationFixedBySeed) {
  const std::vector<std::size_t> a = shuffled_document_order(1000, 1), b = shuffled_document_order(1000, 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, shuffled_document_order(1000, 2));
  std::vector<std::size_t> sorted = a;
  std::ranges::sort(sorted);
  for (std::size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
  // Mixed, not merely rotated: few documents keep their place (expected 1 for a uniform permutation).
  int fixed = 0;
  for (std::size_t i = 0; i < a.size(); ++i) fixed += a[i] == i ? 1 : 0;
  EXPECT_LT(fixed, 10);
  // Position of document 0 over many seeds is spread over the whole range (uniformity check, loose bound).
  std::vector<int> quarter(4, 0);
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    const auto order = shuffled_document_order(8, seed);
    const auto at = std::ranges::find(order, 0u) - order.begin();
    ++quarter[static_cast<std::size_t>(at / 2)];
  }
  for (int q : quarter) EXPECT_GT(q, 60) << "document 0 lands in each quarter about 100 times of 400";
  EXPECT_TRUE(shuffled_document_order(0, 5).empty());
  EXPECT_EQ(shuffled_document_order(1, 5), std::vector<std::size_t>{0});
}

TEST(CorpusBuilder, ShuffledTrainDocumentsKeepTheirTokensAndValKeepsItsOrder) {
  ScratchDir dir;
  CorpusBuilder builder({.out_dir = dir.path(), .shard_tokens = 5, .split = {.val_fraction = 0.5}, .shuffle_seed = 3});
  std::vector<std::vector<std::int32_t>> train_docs;
  for (std::int32_t d = 0; d < 40; ++d) {
    const std::string name = "doc-" + std::to_string(d);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(d % 4 + 1), 100 + d);
    if (!SplitRule{.val_fraction = 0.5}.is_validation(name)) train_docs.push_back(tokens);
    builder.add_document("src", name, tokens);
  }
  const auto report = builder.finish();
  EXPECT_EQ(report["train_order"], "shuffled documents (seed 3)");
  // Read the train stream back and split it at BOS: the documents in the order the seed gives.
  std::vector<std::uint16_t> stream;
  for (const auto& shard : find_split_shards(dir.path(), ShardSplit::train)) {
    const Shard open = Shard::open(shard);  // tokens() views the open shard
    stream.insert(stream.end(), open.tokens().begin(), open.tokens().end());
  }
  const std::vector<std::size_t> order = shuffled_document_order(train_docs.size(), 3);
  std::vector<std::uint16_t> expected;
  for (std::size_t i : order) {
    expected.push_back(50256);
    expected.insert(expected.end(), train_docs[i].begin(), train_docs[i].end());
  }
  EXPECT_EQ(stream, expected);
  EXPECT_NE(order, shuffled_document_order(0, 3));
  bool moved = false;
  for (std::size_t i = 0; i < order.size(); ++i) moved = moved || order[i] != i;
  EXPECT_TRUE(moved);
  // Validation documents are written as added (ascending document numbers).
  const Shard val = Shard::open(dir / "val_000000.bin");
  std::vector<std::uint16_t> val_ids;
  for (std::uint16_t t : val.tokens())
    if (t != 50256) val_ids.push_back(t);
  EXPECT_TRUE(std::ranges::is_sorted(val_ids));
  EXPECT_FALSE(val_ids.empty());
}

TEST(CorpusBuilder, RemovesStaleShardsOfEarlierRun) {
  ScratchDir dir;
  write_shard(dir / "train_000005.bin", U16{50256});
  write_shard(dir / "val_000000.bin.zst", U16{50256});
  CorpusBuilder builder({.out_dir = dir.path(), .split = {.val_fraction = 0.0}});
  builder.add_document("s", "x", std::vector<std::int32_t>{1});
  (void)builder.finish();
  EXPECT_FALSE(std::filesystem::exists(dir / "train_000005.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir / "val_000000.bin.zst"));
  EXPECT_TRUE(std::filesystem::exists(dir / "train_000000.bin"));
}

TEST(CorpusBuilder, CompressedShardsAndErrors) {
  ScratchDir dir;
  CorpusBuilder builder({.out_dir = dir.path(), .split = {.val_fraction = 0.0}, .compress = true});
  EXPECT_THROW(builder.add_document("s", "x", std::vector<std::int32_t>{50257}), Error);
  builder.add_document("s", "y", std::vector<std::int32_t>{5});
  (void)builder.finish();
  EXPECT_TRUE(std::ranges::equal(Shard::open(dir / "train_000000.bin.zst").tokens(), U16{50256, 5}));
  EXPECT_THROW((void)builder.finish(), Error);
  EXPECT_THROW(CorpusBuilder({.out_dir = dir.path(), .shard_tokens = 0}), Error);
}

}  // namespace
}  // namespace gpt
