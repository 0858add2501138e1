// Shard reader/writer (RECIPE §1.1): valid files round-trip; every defect gives its one-line error.
#include "trainer/data/shard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zstd.h>

#include <algorithm>
#include <numeric>

#include "base/check.h"
#include "tests/data/data_test_util.h"

namespace gpt {
namespace {

using test::ScratchDir;
using test::shard_bytes;
using test::write_bytes;
using ::testing::HasSubstr;

// Opens `path` expecting a gpt::Error whose one-line message contains `path` and every fragment.
void expect_open_error(const std::filesystem::path& path, const std::vector<std::string>& fragments) {
  try {
    (void)Shard::open(path);
    FAIL() << "expected an error opening " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_THAT(msg, HasSubstr(path.string()));
    for (const auto& f : fragments) EXPECT_THAT(msg, HasSubstr(f));
  }
}

std::vector<char> zstd_compress(const std::vector<char>& raw) {
  std::vector<char> out(ZSTD_compressBound(raw.size()));
  const std::size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

const std::vector<std::uint16_t> kTokens = {50256, 15496, 11, 995, 0, 50256, 40, 1101, 50255};

TEST(Shard, ReadsPlainShard) {
  ScratchDir dir;
  write_bytes(dir / "a.bin", shard_bytes(kTokens));
  const Shard shard = Shard::open(dir / "a.bin");
  EXPECT_FALSE(shard.compressed());
  ASSERT_EQ(shard.size(), kTokens.size());
  EXPECT_TRUE(std::equal(kTokens.begin(), kTokens.end(), shard.tokens().begin()));
  EXPECT_EQ(shard.path(), dir / "a.bin");
}

TEST(Shard, ReadsEmptyShard) {
  ScratchDir dir;
  write_bytes(dir / "a.bin", shard_bytes({}));
  EXPECT_EQ(Shard::open(dir / "a.bin").size(), 0u);
}

TEST(Shard, ReadsZstdShard) {
  ScratchDir dir;
  write_bytes(dir / "a.bin.zst", zstd_compress(shard_bytes(kTokens)));
  const Shard shard = Shard::open(dir / "a.bin.zst");
  EXPECT_TRUE(shard.compressed());
  EXPECT_TRUE(std::ranges::equal(shard.tokens(), kTokens));
}

TEST(Shard, ReadsFixturesStartingWithBos) {
  const std::filesystem::path fixtures = SPEEDRUN_FIXTURES_DIR;
  const Shard train = Shard::open(fixtures / "austen_train_000000.bin");
  const Shard val = Shard::open(fixtures / "austen_val_000000.bin");
  EXPECT_EQ(train.size(), 131072u);
  EXPECT_EQ(val.size(), 32768u);
  EXPECT_EQ(train.tokens()[0], kBosToken);
  EXPECT_EQ(val.tokens()[0], kBosToken);
}

TEST(Shard, MovedShardKeepsItsTokens) {
  ScratchDir dir;
  write_bytes(dir / "a.bin", shard_bytes(kTokens));
  Shard first = Shard::open(dir / "a.bin");
  Shard second = std::move(first);
  EXPECT_TRUE(std::ranges::equal(second.tokens(), kTokens));
}

TEST(ShardErrors, MissingFile) {
  ScratchDir dir;
  expect_open_error(dir / "nope.bin", {"no such file"});
}

TEST(ShardErrors, DirectoryInsteadOfFile) {
  ScratchDir dir;
  std::filesystem::create_directory(dir / "d.bin");
  expect_open_error(dir / "d.bin", {"not a regular file"});
}

TEST(ShardErrors, WrongMagic) {
  ScratchDir dir;
  write_bytes(dir / "a.bin", shard_bytes(kTokens, 20240519));
  expect_open_error(dir / "a.bin", {"wrong magic 20240519", "expected 20240520"});
}

TEST(ShardErrors, WrongVersion) {
  ScratchDir dir;
  write_bytes(dir / "a.bin", shard_bytes(kTokens, kShardMagic, 7));
  expect_open_error(dir / "a.bin", {"wrong version 7", "expected 1"});
}

TEST(ShardErrors, NegativeCount) {
  ScratchDir dir;
  write_bytes(dir / "a.bin", shard_bytes(kTokens, kShardMagic, kShardVersion, -5));
  expect_open_error(dir / "a.bin", {"negative token count -5"});
}

TEST(ShardErrors, TruncatedHeader) {
  ScratchDir dir;
  auto bytes = shard_bytes(kTokens);
  bytes.resize(1000);
  write_bytes(dir / "a.bin", bytes);
  expect_open_error(dir / "a.bin", {"truncated header: 1000 bytes", "expected 1024"});
}

TEST(ShardErrors, EmptyFileIsTruncatedHeader) {
  ScratchDir dir;
  write_bytes(dir / "a.bin", {});
  expect_open_error(dir / "a.bin", {"truncated header: 0 bytes"});
}

TEST(ShardErrors, PayloadShorterThanCount) {
  ScratchDir dir;
  write_bytes(dir / "a.bin", shard_bytes(kTokens, kShardMagic, kShardVersion, 10));
  expect_open_error(dir / "a.bin", {"truncated payload: 18 bytes", "expected 20", "10 tokens"});
}

TEST(ShardErrors, PayloadOddByteShort) {
  ScratchDir dir;
  auto bytes = shard_bytes(kTokens);
  bytes.pop_back();
  write_bytes(dir / "a.bin", bytes);
  expect_open_error(dir / "a.bin", {"truncated payload: 17 bytes", "expected 18"});
}

TEST(ShardErrors, PayloadLongerThanCount) {
  ScratchDir dir;
  write_bytes(dir / "a.bin", shard_bytes(kTokens, kShardMagic, kShardVersion, 8));
  expect_open_error(dir / "a.bin", {"payload too long: 18 bytes", "expected 16", "8 tokens"});
}

TEST(ShardErrors, TokenIdOutOfRangeNamesOffset) {
  ScratchDir dir;
  auto tokens = kTokens;
  tokens[6] = 50257;
  write_bytes(dir / "a.bin", shard_bytes(tokens));
  expect_open_error(dir / "a.bin", {"token id 50257 >= 50257", "token offset 6", "byte 1036"});
}

TEST(ShardErrors, TokenCheckCanBeSkipped) {
  ScratchDir dir;
  auto tokens = kTokens;
  tokens[0] = 65535;
  write_bytes(dir / "a.bin", shard_bytes(tokens));
  EXPECT_EQ(Shard::open(dir / "a.bin", {.check_token_ids = false}).tokens()[0], 65535);
}

TEST(ShardErrors, ZstdGarbage) {
  ScratchDir dir;
  write_bytes(dir / "a.bin.zst", std::vector<char>(100, 'x'));
  expect_open_error(dir / "a.bin.zst", {"corrupt zstd data"});
}

TEST(ShardErrors, ZstdTruncatedFrame) {
  ScratchDir dir;
  std::vector<std::uint16_t> many(5000);
  std::iota(many.begin(), many.end(), 0);
  auto compressed = zstd_compress(shard_bytes(many));
  compressed.resize(compressed.size() / 2);
  write_bytes(dir / "a.bin.zst", compressed);
  expect_open_error(dir / "a.bin.zst", {"truncated zstd stream"});
}

TEST(ShardErrors, ZstdEmptyFile) {
  ScratchDir dir;
  write_bytes(dir / "a.bin.zst", {});
  expect_open_error(dir / "a.bin.zst", {"truncated zstd stream"});
}

TEST(ShardErrors, ZstdWrongMagic) {
  ScratchDir dir;
  write_bytes(dir / "a.bin.zst", zstd_compress(shard_bytes(kTokens, 1)));
  expect_open_error(dir / "a.bin.zst", {"wrong magic 1"});
}

TEST(ShardErrors, ZstdTruncatedHeader) {
  ScratchDir dir;
  auto raw = shard_bytes(kTokens);
  raw.resize(512);
  write_bytes(dir / "a.bin.zst", zstd_compress(raw));
  expect_open_error(dir / "a.bin.zst", {"truncated header: 512 bytes"});
}

TEST(ShardErrors, ZstdPayloadShortAndLong) {
  ScratchDir dir;
  write_bytes(dir / "short.bin.zst", zstd_compress(shard_bytes(kTokens, kShardMagic, kShardVersion, 12)));
  expect_open_error(dir / "short.bin.zst", {"truncated payload: 18 bytes", "expected 24"});
  write_bytes(dir / "long.bin.zst", zstd_compress(shard_bytes(kTokens, kShardMagic, kShardVersion, 3)));
  expect_open_error(dir / "long.bin.zst", {"payload too long", "6 bytes"});
}

TEST(ShardErrors, ZstdHugeCountDoesNotAllocate) {
  ScratchDir dir;
  write_bytes(dir / "a.bin.zst", zstd_compress(shard_bytes(kTokens, kShardMagic, kShardVersion, INT32_MAX)));
  expect_open_error(dir / "a.bin.zst", {"truncated payload: 18 bytes"});
}

TEST(ShardWrite, RoundTripsPlainAndZstd) {
  ScratchDir dir;
  write_shard(dir / "a.bin", kTokens);
  write_shard(dir / "b.bin.zst", kTokens);
  EXPECT_TRUE(std::ranges::equal(Shard::open(dir / "a.bin").tokens(), kTokens));
  EXPECT_TRUE(std::ranges::equal(Shard::open(dir / "b.bin.zst").tokens(), kTokens));
  EXPECT_EQ(std::filesystem::file_size(dir / "a.bin"), 1024u + 2 * kTokens.size());
}

TEST(ShardWrite, WritesExactHeaderBytes) {
  ScratchDir dir;
  write_shard(dir / "a.bin", kTokens);
  std::ifstream in(dir / "a.bin", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, shard_bytes(kTokens));
}

TEST(ShardWrite, ReplacesExistingFileAndLeavesNoTemporary) {
  ScratchDir dir;
  write_shard(dir / "a.bin", kTokens);
  write_shard(dir / "a.bin", std::vector<std::uint16_t>{kBosToken});
  EXPECT_EQ(Shard::open(dir / "a.bin").size(), 1u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()), 1);
}

TEST(ShardWrite, RejectsBadTokenWithoutTouchingTarget) {
  ScratchDir dir;
  write_shard(dir / "a.bin", kTokens);
  const std::vector<std::uint16_t> bad = {kBosToken, 60000};
  EXPECT_THROW(write_shard(dir / "a.bin", bad), Error);
  EXPECT_EQ(Shard::open(dir / "a.bin").size(), kTokens.size());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()), 1);
}

TEST(ShardWrite, UnwritableDirectoryIsAnError) {
  ScratchDir dir;
  EXPECT_THROW(write_shard(dir / "missing" / "a.bin", kTokens), Error);
}

TEST(BosPositions, FindsEveryBos) {
  EXPECT_EQ(bos_positions(kTokens), (std::vector<std::int64_t>{0, 5}));
  EXPECT_TRUE(bos_positions(std::vector<std::uint16_t>{1, 2, 3}).empty());
}

TEST(ListShards, LexicographicWithPrefixAndGlob) {
  ScratchDir dir;
  for (const char* name : {"train_000002.bin", "train_000000.bin", "train_000001.bin.zst", "val_000000.bin",
                           "train_notes.txt", "train_000003.bin.tmp.1"}) {
    write_shard(dir / name, kTokens);
  }
  const auto names = [](const std::vector<std::filesystem::path>& paths) {
    std::vector<std::string> out;
    for (const auto& p : paths) out.push_back(p.filename().string());
    return out;
  };
  const std::vector<std::string> train = {"train_000000.bin", "train_000001.bin.zst", "train_000002.bin"};
  EXPECT_EQ(names(list_shards(dir.path(), "train_")), train);
  EXPECT_EQ(names(list_shards(dir.path(), "train_*.bin")), train);
  EXPECT_EQ(names(list_shards(dir.path(), "train_00000[12].bin")),
            (std::vector<std::string>{"train_000001.bin.zst", "train_000002.bin"}));
  EXPECT_EQ(names(list_shards(dir.path(), "val_")), (std::vector<std::string>{"val_000000.bin"}));
  EXPECT_TRUE(list_shards(dir.path(), "fineweb_train_").empty());
}

TEST(ListShards, PrefersPlainTwin) {
  ScratchDir dir;
  write_shard(dir / "train_000000.bin.zst", kTokens);
  write_shard(dir / "train_000000.bin", kTokens);
  const auto paths = list_shards(dir.path(), "train_");
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(paths[0].filename(), "train_000000.bin");
}

TEST(ListShards, FindSplitPrefersFineweb) {
  ScratchDir dir;
  write_shard(dir / "train_000000.bin", kTokens);
  EXPECT_EQ(find_split_shards(dir.path(), ShardSplit::train).size(), 1u);
  write_shard(dir / "fineweb_train_000001.bin", kTokens);
  write_shard(dir / "fineweb_val_000000.bin", kTokens);
  const auto train = find_split_shards(dir.path(), ShardSplit::train);
  ASSERT_EQ(train.size(), 1u);
  EXPECT_EQ(train[0].filename(), "fineweb_train_000001.bin");
  EXPECT_EQ(find_split_shards(dir.path(), ShardSplit::val)[0].filename(), "fineweb_val_000000.bin");
}

TEST(ListShards, ErrorsNameTheDirectory) {
  ScratchDir dir;
  try {
    (void)find_split_shards(dir.path(), ShardSplit::val);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir.path().string()));
    EXPECT_THAT(e.what(), HasSubstr("no val shards"));
  }
  EXPECT_THROW((void)list_shards(dir / "missing", "train_"), Error);
}

}  // namespace
}  // namespace gpt
