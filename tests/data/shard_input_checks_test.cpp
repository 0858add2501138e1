// Corpus shards that cannot feed a run are rejected when opened at start-up, naming the shard (issue: fuzzing and
// bad-input defects): no tokens, no BOS, or not a regular file (a FIFO would block the open).
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "tests/common/error_of.h"
#include "base/check.h"
#include "tests/data/data_test_util.h"
#include "trainer/data/val_loader.h"

namespace gpt {
namespace {

using test::error_of;

TEST(ShardInputChecks, EmptyAndBoslessShardsAreRejected) {
  test::ScratchDir dir;
  write_shard(dir / "train_000000.bin", std::vector<std::uint16_t>{});
  write_shard(dir / "train_000001.bin", std::vector<std::uint16_t>(100, 7));
  write_shard(dir / "train_000002.bin", std::vector<std::uint16_t>{7, kBosToken, 8});
  std::string msg = error_of([&] { check_corpus_shard(Shard::open(dir / "train_000000.bin"), ShardSplit::train); });
  EXPECT_NE(msg.find("train_000000.bin: holds 0 tokens"), std::string::npos) << msg;
  msg = error_of([&] { check_corpus_shard(Shard::open(dir / "train_000001.bin"), ShardSplit::val); });
  EXPECT_NE(msg.find("train_000001.bin: holds 100 tokens but no BOS"), std::string::npos) << msg;
  EXPECT_NO_THROW(check_corpus_shard(Shard::open(dir / "train_000002.bin"), ShardSplit::train));
}

TEST(ShardInputChecks, ValLoaderRejectsAShardWithoutBos) {
  test::ScratchDir dir;
  write_shard(dir / "val_000000.bin", std::vector<std::uint16_t>(5000, 7));
  ValLoaderOptions o;
  o.shards = {dir / "val_000000.bin"};
  o.total_tokens = 1024;
  o.window_tokens = 512;
  o.cu_seqlens_rows = 64;
  o.bigram_rows = 1024;
  const std::string msg = error_of([&] { ValLoader loader(o); });
  EXPECT_NE(msg.find("val_000000.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no BOS"), std::string::npos) << msg;
}

TEST(ShardInputChecks, ValLoaderAsksForMoreTokensThanExistWithoutAllocatingThem) {
  // Before: the loader reserved the requested span up front, so 2^40 tokens was std::bad_alloc.
  test::ScratchDir dir;
  write_shard(dir / "val_000000.bin", std::vector<std::uint16_t>(5000, kBosToken));
  ValLoaderOptions o;
  o.shards = {dir / "val_000000.bin"};
  o.total_tokens = int64_t{1} << 40;
  o.window_tokens = 1 << 20;
  o.cu_seqlens_rows = 64;
  o.bigram_rows = 1024;
  const std::string msg = error_of([&] { ValLoader loader(o); });
  EXPECT_NE(msg.find("hold only 5000"), std::string::npos) << msg;
}

TEST(ShardInputChecks, FifoNamedLikeAShardIsRejectedWithoutBlocking) {
  test::ScratchDir dir;
  ASSERT_EQ(::mkfifo((dir / "train_000000.bin").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((dir / "val_000000.bin.zst").c_str(), 0600), 0);
  std::string msg = error_of([&] { Shard::open(dir / "train_000000.bin"); });
  EXPECT_NE(msg.find("train_000000.bin: not a regular file"), std::string::npos) << msg;
  msg = error_of([&] { Shard::open(dir / "val_000000.bin.zst"); });
  EXPECT_NE(msg.find("val_000000.bin.zst: not a regular file"), std::string::npos) << msg;
}

}  // namespace
}  // namespace gpt
