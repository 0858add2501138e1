// Validation loader (RECIPE §6): windows tile the range for every W, cu_seqlens by BOS, errors.
#include "trainer/data/val_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "base/check.h"
#include "tests/data/data_test_util.h"

namespace gpt {
namespace {

using test::make_documents;
using test::ScratchDir;
using ::testing::HasSubstr;

TEST(ValWindowOffset, ReferenceFormula) {
  EXPECT_EQ(validation_window_offset(0, 0, 8, 262144), 0);
  EXPECT_EQ(validation_window_offset(0, 3, 8, 262144), 3 * 262144);
  EXPECT_EQ(validation_window_offset(4, 7, 8, 262144), 4 * 8 * 262144 + 7 * 262144);
  EXPECT_EQ(validation_window_offset(39, 0, 1, 262144), 10485760 - 262144);  // last window at W = 1
}

struct ValData {
  ScratchDir dir;
  std::vector<std::uint16_t> stream;
  std::vector<std::filesystem::path> paths;
  // Splits `stream` over shards of the given sizes (the rest into a last shard).
  explicit ValData(std::vector<std::uint16_t> tokens, const std::vector<std::size_t>& cuts = {})
      : stream(std::move(tokens)) {
    std::size_t begin = 0;
    auto emit = [&](std::size_t end) {
      paths.push_back(dir / ("val_" + std::to_string(paths.size()) + ".bin"));
      write_shard(paths.back(), std::span(stream).subspan(begin, end - begin));
      begin = end;
    };
    for (std::size_t cut : cuts) emit(cut);
    emit(stream.size());
  }
};

std::vector<std::uint16_t> random_stream(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> len(1, 60);
  std::vector<int> lengths;
  std::size_t total = 0;
  while (total < n) {
    lengths.push_back(len(rng));
    total += static_cast<std::size_t>(lengths.back());
  }
  auto tokens = make_documents(lengths);
  tokens.resize(n);
  tokens[0] = 123;  // the stream need not start at a BOS
  return tokens;
}

ValLoaderOptions options(const ValData& data, std::int64_t total, std::int64_t tv, int world, int rank) {
  return ValLoaderOptions{.shards = data.paths,
                          .total_tokens = total,
                          .window_tokens = tv,
                          .world_size = world,
                          .rank = rank,
                          .cu_seqlens_rows = 64,
                          .bigram_rows = kHeadBigramRows};
}

TEST(ValLoader, WindowsTileTheRangeForEveryWorldSize) {
  const ValData data(random_stream(4096 + 50, 1), {1000, 3000});  // three shards
  const std::int64_t total = 4096, tv = 128;
  for (int world : {1, 2, 4, 8}) {
    std::vector<int> covered(static_cast<std::size_t>(total), 0);
    for (int rank = 0; rank < world; ++rank) {
      const ValLoader loader(options(data, total, tv, world, rank));
      EXPECT_EQ(loader.steps(), total / (world * tv));
      for (std::int64_t step = 0; step < loader.steps(); ++step) {
        const Microbatch mb = loader.window(step);
        const std::int64_t o = validation_window_offset(step, rank, world, tv);
        ASSERT_EQ(mb.pieces, (SlicePlan{{o, o + tv + 1}}));
        for (std::int64_t t = 0; t < tv; ++t) {
          const auto ut = static_cast<std::size_t>(t);
          ASSERT_EQ(mb.inputs[ut], data.stream[static_cast<std::size_t>(o + t)]);
          ASSERT_EQ(mb.targets[ut], data.stream[static_cast<std::size_t>(o + t + 1)]);
          ++covered[static_cast<std::size_t>(o + t)];
        }
      }
    }
    EXPECT_EQ(std::count(covered.begin(), covered.end(), 1), total) << "W=" << world;
  }
}

TEST(ValLoader, CuSeqlensFollowBosAndBigramStartsReserved) {
  // Window 0 = [BOS 1 2 BOS 3], window 1 = [4 BOS 5 6 7] (+ target 8): Tv = 5.
  const std::vector<std::uint16_t> stream = {50256, 1, 2, 50256, 3, 4, 50256, 5, 6, 7, 8};
  const ValData data(stream);
  ValLoaderOptions opts = options(data, 10, 5, 1, 0);
  opts.cu_seqlens_rows = 6;
  const ValLoader loader(opts);
  const Microbatch w0 = loader.window(0);
  EXPECT_EQ(w0.cu_seqlens, (std::vector<std::int32_t>{0, 0, 3, 5, 5, 5}));  // empty first segment
  const Microbatch w1 = loader.window(1);
  EXPECT_EQ(w1.cu_seqlens, (std::vector<std::int32_t>{0, 1, 5, 5, 5, 5}));  // context-less first segment
  EXPECT_EQ(w1.targets.back(), 8);
  EXPECT_EQ(w1.bigram_ids[0], kHeadBigramRows - 1);
  EXPECT_EQ(w1.bigram_ids, bigram_row_ids(w1.inputs, kHeadBigramRows - 1));
  EXPECT_EQ(w1.sign_rows, bigram_sign_rows(w1.inputs));
  EXPECT_EQ(w1.max_seqlen, 4);
}

TEST(ValLoader, FixtureShardAtMiniScale) {
  // Persuasion fixture: 32768 tokens; 4 windows of 8000 at W = 2.
  const std::filesystem::path fixture = std::filesystem::path(SPEEDRUN_FIXTURES_DIR) / "austen_val_000000.bin";
  const ValLoader loader(ValLoaderOptions{.shards = {fixture},
                                          .total_tokens = 32000,
                                          .window_tokens = 8000,
                                          .world_size = 2,
                                          .rank = 1,
                                          .cu_seqlens_rows = 896});
  EXPECT_EQ(loader.steps(), 2);
  const Microbatch mb = loader.window(1);
  const Shard shard = Shard::open(fixture);
  EXPECT_EQ(mb.inputs.front(), shard.tokens()[24000]);
  EXPECT_EQ(mb.targets.back(), shard.tokens()[32000]);
}

TEST(ValLoader, TooFewTokensNamesTheShard) {
  const ValData data(random_stream(4096, 2));  // needs 4097
  try {
    (void)ValLoader(options(data, 4096, 128, 1, 0));
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("needs 4097 tokens"));
    EXPECT_THAT(e.what(), HasSubstr(data.paths[0].string()));
    EXPECT_THAT(e.what(), HasSubstr("hold only 4096"));
  }
}

TEST(ValLoader, RejectsBadGeometry) {
  const ValData data(random_stream(5000, 3));
  EXPECT_THROW((void)ValLoader(options(data, 4000, 128, 1, 0)), Error);  // not a multiple of W·Tv
  EXPECT_THROW((void)ValLoader(options(data, 4096, 128, 3, 0)), Error);
  EXPECT_THROW((void)ValLoader(options(data, 4096, 128, 2, 2)), Error);
  EXPECT_THROW((void)ValLoader(options(data, 4096, 0, 1, 0)), Error);
  const ValLoader loader(options(data, 4096, 128, 1, 0));
  EXPECT_THROW((void)loader.window(32), Error);
  EXPECT_THROW((void)loader.window(-1), Error);
}

TEST(ValLoader, TooManyDocumentsForTableIsAnError) {
  std::vector<std::uint16_t> stream(300, kBosToken);  // every token a BOS
  const ValData data(stream);
  ValLoaderOptions opts = options(data, 256, 256, 1, 0);
  opts.cu_seqlens_rows = 128;
  const ValLoader loader(opts);
  EXPECT_THROW((void)loader.window(0), Error);
}

}  // namespace
}  // namespace gpt
