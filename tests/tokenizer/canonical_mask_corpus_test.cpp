// RECIPE §S.6 on the whole mask (each test builds it once: slow under ASan, hence this `slow` folder): the regression
// counts of the independent implementation, and no pair that real text produces is masked. Every adjacent pair (p, x)
// of the token stream of each corpus split is looked up; none may be set.
//
// BOS (50256) pairs are scanned like any other: the final validation masks the logits of every position, including
// a position whose input is BOS (first token of a document) and one whose target is BOS (last token before the next
// document), so those pairs must be unmasked too. They are counted separately in the log. Tier 1 gives BOS neither a
// row nor a column, so they hold by construction; the scan makes sure of it.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>

#include "source_dir.h"
#include "tests/tokenizer/tokenizer_test_util.h"
#include "trainer/data/shard.h"
#include "trainer/tokenizer/canonical_mask.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

const CanonicalMask& full_mask() {
  static const CanonicalMask mask = build_canonical_mask(testing::gpt2_tokenizer());
  return mask;
}

struct PairScan {
  int64_t pairs = 0;
  int64_t bos_pairs = 0;
  int64_t violations = 0;
  std::string first_violations;  // up to 10, "p x at i"
};

void scan_pairs(const CanonicalMask& mask, std::span<const uint16_t> tokens, PairScan& scan) {
  for (size_t i = 1; i < tokens.size(); ++i) {
    const int64_t p = tokens[i - 1], x = tokens[i];
    ++scan.pairs;
    if (p == kBosToken || x == kBosToken) ++scan.bos_pairs;
    if (mask.test(p, x)) {
      if (++scan.violations <= 10)
        scan.first_violations += std::to_string(p) + " " + std::to_string(x) + " at " + std::to_string(i) + "; ";
    }
  }
}

// Scans the train and val shards of a corpus folder and expects no masked pair.
void expect_no_masked_pair(const fs::path& dir) {
  const CanonicalMask& mask = full_mask();
  for (const ShardSplit split : {ShardSplit::train, ShardSplit::val}) {
    for (const fs::path& path : find_split_shards(dir, split)) {
      const Shard shard = Shard::open(path);
      PairScan scan;
      scan_pairs(mask, shard.tokens(), scan);
      EXPECT_GT(scan.pairs, 0) << path;
      EXPECT_EQ(scan.violations, 0) << path << ": " << scan.first_violations;
      std::cout << path.string() << ": " << scan.pairs << " adjacent pairs (" << scan.bos_pairs << " with BOS), "
                << scan.violations << " masked\n";
    }
  }
}

// One build (tier 0 + tier 1) checks both tiers: tier 1 never touches the padding columns, tier 0 only those.
TEST(CanonicalMask, RegressionCountsAndTierZeroColumns) {
  const Gpt2Tokenizer& tok = testing::gpt2_tokenizer();
  const CanonicalMask& mask = full_mask();
  constexpr int64_t kV = kCanonicalMaskVocab;
  constexpr int64_t kPaddingColumns = kV - Gpt2Tokenizer::kEndOfText - 1;  // 47
  // The regression values count tier 1 alone: 70,889,701 bits in 47,432 rows (columns < 50257).
  // Columns 0..50255 are bytes 0..6281 of a row, column 50256 is bit 0 of byte 6282, the padding columns the
  // rest of byte 6282 and bytes 6283..6287.
  constexpr size_t kBosByte = Gpt2Tokenizer::kEndOfText / 8;
  int64_t real_bits = 0, real_rows = 0;
  for (int64_t p = 0; p < kV; ++p) {
    const std::span<const uint8_t> row = mask.row(p);
    int64_t in_row = row[kBosByte] & 1;
    for (size_t b = 0; b < kBosByte; ++b) in_row += std::popcount(row[b]);
    real_bits += in_row;
    real_rows += in_row > 0 ? 1 : 0;
    ASSERT_EQ(row[kBosByte] & 0xFE, 0xFE) << p;
    for (size_t b = kBosByte + 1; b < row.size(); ++b) ASSERT_EQ(row[b], 0xFF) << p << " byte " << b;
  }
  EXPECT_EQ(real_bits, 70'889'701);
  EXPECT_EQ(real_rows, 47'432);
  EXPECT_EQ(mask.count_set_bits(), 70'889'701 + kPaddingColumns * kV);
  EXPECT_EQ(mask.count_nonempty_rows(), kV);
  // <|endoftext|> has no merge history: its row holds only tier 0, its column nothing.
  for (int64_t v = 0; v <= Gpt2Tokenizer::kEndOfText; ++v) {
    EXPECT_FALSE(mask.test(Gpt2Tokenizer::kEndOfText, v)) << v;
    EXPECT_FALSE(mask.test(v, Gpt2Tokenizer::kEndOfText)) << v;
  }
  // Byte layout: bit x of row p in byte x/8, bit x mod 8.
  EXPECT_EQ(mask.bytes()[static_cast<size_t>(kCanonicalMaskRowBytes - 1)], 0xFF);         // row 0, columns 50296..50303
  EXPECT_EQ(mask.bytes()[static_cast<size_t>(Gpt2Tokenizer::kEndOfText / 8)] & 0x01, 0);  // column 50256
  EXPECT_EQ(mask.bytes()[static_cast<size_t>(Gpt2Tokenizer::kEndOfText / 8)] & 0xFE, 0xFE);
  const Tensor t = mask.to_tensor();
  ASSERT_EQ(t.shape(), (std::vector<int64_t>{kV, kV / 8}));
  EXPECT_EQ(std::memcmp(t.raw(), mask.bytes().data(), mask.bytes().size()), 0);

  // Soundness: a masked pair must not be the encoding of its own two byte strings side by side (that text would
  // emit x right after p). A fixed sample of the set bits of the real-token block.
  std::mt19937_64 rng(24);
  int checked = 0;
  while (checked < 3000) {
    const auto p = static_cast<int32_t>(rng() % Gpt2Tokenizer::kEndOfText);
    const auto x = static_cast<int32_t>(rng() % Gpt2Tokenizer::kEndOfText);
    if (!mask.test(p, x)) continue;
    ++checked;
    const std::string text = std::string(tok.token_bytes(p)) + std::string(tok.token_bytes(x));
    EXPECT_NE(tok.encode_ordinary(text), (std::vector<int32_t>{p, x})) << "masked pair " << p << " " << x;
  }
  // Pairs known to be masked: " t" + "he" always merges into " the"; "a" + "b" into "ab".
  EXPECT_TRUE(mask.test(256, 258));
  EXPECT_TRUE(mask.test(*tok.find_token("a"), *tok.find_token("b")));
  // ... and pairs that occur in text: " the" " cat", "." " The".
  EXPECT_FALSE(mask.test(262, *tok.find_token(" cat")));
  EXPECT_FALSE(mask.test(*tok.find_token("."), *tok.find_token(" The")));
}

TEST(CanonicalMaskCorpus, ScanFindsAPlantedPair) {
  // The scan itself can fail: " t" followed by "he" is masked (the text " the" is one token).
  const std::vector<uint16_t> tokens = {kBosToken, 262, 256, 258, kBosToken};
  PairScan scan;
  scan_pairs(full_mask(), tokens, scan);
  EXPECT_EQ(scan.pairs, 4);
  EXPECT_EQ(scan.bos_pairs, 2);
  EXPECT_EQ(scan.violations, 1);
}

TEST(CanonicalMaskCorpus, DefaultCorpusHasNoMaskedPair) {
  const fs::path dir = fs::path(SPEEDRUN_SOURCE_DIR) / "data" / "default";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " is absent: build it with `scripts/build-corpus default`";
  expect_no_masked_pair(dir);
}

TEST(CanonicalMaskCorpus, ProxyCorpusHasNoMaskedPair) {
  const fs::path dir = fs::path(SPEEDRUN_SOURCE_DIR) / "data" / "proxy";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " is absent: the proxy corpus is optional";
  expect_no_masked_pair(dir);
}

}  // namespace
}  // namespace gpt
