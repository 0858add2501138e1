// RECIPE §S.6: the canonical mask never masks a pair that real text produces. Every adjacent pair (p, x) of the
// token stream of each corpus split is looked up; none may be set.
//
// BOS (50256) pairs are scanned like any other: the final validation masks the logits of every position, including
// a position whose input is BOS (first token of a document) and one whose target is BOS (last token before the next
// document), so those pairs must be unmasked too. They are counted separately in the log. Tier 1 gives BOS neither a
// row nor a column, so they hold by construction; the scan makes sure of it.
#include <gtest/gtest.h>

#include <filesystem>
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
      if (++scan.violations <= 10) scan.first_violations += std::to_string(p) + " " + std::to_string(x) + " at " +
                                                            std::to_string(i) + "; ";
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
      std::cout << path.string() << ": " << scan.pairs << " adjacent pairs (" << scan.bos_pairs
                << " with BOS), " << scan.violations << " masked\n";
    }
  }
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
  ASSERT_TRUE(fs::is_directory(dir)) << dir << " is missing: build the default corpus (see README, data/default)";
  expect_no_masked_pair(dir);
}

TEST(CanonicalMaskCorpus, ProxyCorpusHasNoMaskedPair) {
  const fs::path dir = fs::path(SPEEDRUN_SOURCE_DIR) / "data" / "proxy";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " is absent: the proxy corpus is optional";
  expect_no_masked_pair(dir);
}

}  // namespace
}  // namespace gpt
