// RECIPE §S.6 canonical mask: the pieces of the tier-1 construction against hand-checked values, the regression
// counts of the independent implementation, and the background build.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "base/check.h"
#include "trainer/comm/comm.h"
#include "tests/tokenizer/tokenizer_test_util.h"
#include "trainer/tokenizer/canonical_mask.h"
#include "trainer/tokenizer/unicode_class.h"
#include "tests/common/thread_ranks.h"

namespace gpt {
namespace {

using namespace canonical_mask_detail;
using testing::gpt2_tokenizer;
using testing::utf8;

std::vector<std::pair<int32_t, int32_t>> entries(const std::vector<TrajectoryEntry>& trajectory) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const TrajectoryEntry& e : trajectory) out.emplace_back(e.start, e.piece);
  return out;
}

using Entries = std::vector<std::pair<int32_t, int32_t>>;

TEST(CanonicalMaskReplay, TrajectoriesOfKnownTokens) {
  // Expected values from a separate replay of the ranks file (merge the lowest-rank adjacent pair, leftmost first).
  const Gpt2Tokenizer& tok = gpt2_tokenizer();
  const TokenReplay the = replay_token(tok, 262);  // " the": " " "t" "h" "e" -> " t" "he" -> " the"
  EXPECT_EQ(the.final_left, 256);
  EXPECT_EQ(the.final_right, 258);
  EXPECT_EQ(entries(the.first), (Entries{{0, 220}, {257, 256}, {263, 262}}));
  EXPECT_EQ(entries(the.last), (Entries{{0, 68}, {258, 258}, {262, 262}}));
  const TokenReplay gazed = replay_token(tok, 50255);  // " gazed"
  EXPECT_EQ(gazed.final_left, 308);
  EXPECT_EQ(gazed.final_right, 13865);
  EXPECT_EQ(entries(gazed.first), (Entries{{0, 220}, {309, 308}, {50256, 50255}}));
  EXPECT_EQ(entries(gazed.last), (Entries{{0, 67}, {276, 276}, {13865, 13865}, {50255, 50255}}));
  const TokenReplay comma = replay_token(tok, 11);
  EXPECT_EQ(comma.final_left, -1);
  EXPECT_EQ(entries(comma.first), (Entries{{0, 11}}));
  EXPECT_EQ(entries(comma.last), (Entries{{0, 11}}));
}

TEST(CanonicalMaskReplay, EveryTokenEndsAsItselfThroughItsOwnMerge) {
  const Gpt2Tokenizer& tok = gpt2_tokenizer();
  for (int32_t t = 256; t < Gpt2Tokenizer::kMergeableTokens; t += 97) {
    const TokenReplay r = replay_token(tok, t);
    EXPECT_EQ(std::string(tok.token_bytes(r.final_left)) + std::string(tok.token_bytes(r.final_right)),
              tok.token_bytes(t));
    EXPECT_EQ(r.first.back().start, t + 1);  // the final merge involves the first piece one step later
    EXPECT_EQ(r.last.back().start, t);       // ... and produces the last piece at its own rank
  }
}

TEST(CanonicalMaskEdges, ClassesOfPrefixesAndSuffixes) {
  EXPECT_EQ(edge_class_letter(start_class("abc")), 'L');
  EXPECT_EQ(edge_class_letter(start_class(" x")), 'S');
  EXPECT_EQ(edge_class_letter(start_class("7a")), 'N');
  EXPECT_EQ(edge_class_letter(start_class(",")), 'O');
  EXPECT_EQ(edge_class_letter(start_class(utf8(0x2019) + "s")), 'O');  // right single quote: Pf
  EXPECT_EQ(edge_class_letter(start_class(utf8(0xE9))), 'L');          // é
  EXPECT_EQ(edge_class_letter(start_class(utf8(0x3000))), 'S');        // ideographic space
  EXPECT_EQ(edge_class_letter(start_class(utf8(0x00BD))), 'N');        // ½ (No)
  EXPECT_EQ(edge_class_letter(start_class("\x1c")), 'O');              // isspace in Python, excluded by §S.6
  EXPECT_EQ(edge_class_letter(start_class("\x80"
                                          "abc")),
            '?');                                              // starts with a continuation byte
  EXPECT_EQ(edge_class_letter(start_class("\xe2\x80")), '?');  // truncated sequence
  EXPECT_EQ(edge_class_letter(end_class("ab\xe2")), '?');
  EXPECT_EQ(edge_class_letter(end_class("\xe2\x80\x99")), 'O');
  EXPECT_EQ(edge_class_letter(end_class("x" + utf8(0xA0))), 'S');  // no-break space
  EXPECT_EQ(edge_class_letter(end_class("\x80"
                                        "9")),
            'N');                                                     // only the shortest valid suffix matters
  EXPECT_EQ(edge_class_letter(end_class("a" + utf8(0x10348))), 'L');  // 4-byte Gothic letter
}

TEST(CanonicalMaskEdges, SpaceClassIsPythonIsspaceWithoutInformationSeparators) {
  // Python's str.isspace set (category Zs or bidirectional class WS, B, S; Unicode 15), minus U+001C..U+001F.
  std::set<char32_t> expected = {0x09, 0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                                 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  for (char32_t cp = 0x2000; cp <= 0x200A; ++cp) expected.insert(cp);
  std::set<char32_t> actual;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (code_point_class(cp) == EdgeClass::space) actual.insert(cp);
  }
  EXPECT_EQ(actual, expected);
}

TEST(CanonicalMaskEdges, ClosedContractions) {
  EXPECT_TRUE(is_closed("'s"));
  EXPECT_TRUE(is_closed("'ll"));
  EXPECT_TRUE(is_closed("n't"));
  EXPECT_TRUE(is_closed(" it's"));
  EXPECT_TRUE(is_closed("9'd"));
  EXPECT_TRUE(is_closed(utf8(0xE9) + "'re"));
  EXPECT_FALSE(is_closed(" 's"));  // preceded by a space
  EXPECT_FALSE(is_closed("''s"));  // preceded by punctuation
  EXPECT_FALSE(is_closed("s"));
  EXPECT_FALSE(is_closed("'x"));
  EXPECT_FALSE(is_closed(utf8(0x2019) + "s"));  // only the ASCII apostrophe
  EXPECT_FALSE(is_closed("\xff'm"));            // does not decode
}

TEST(CanonicalMaskBuild, RecipeSettings) {
  EXPECT_FALSE(canonical_mask_options("off").has_value());
  const auto tier0 = canonical_mask_options("tier0");
  ASSERT_TRUE(tier0.has_value());
  EXPECT_TRUE(tier0->tier0);
  EXPECT_FALSE(tier0->tier1);
  const auto tier1 = canonical_mask_options("tier1");
  ASSERT_TRUE(tier1.has_value());
  EXPECT_TRUE(tier1->tier0);
  EXPECT_TRUE(tier1->tier1);
  try {
    canonical_mask_options("tier2");
    ADD_FAILURE() << "tier2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("extensions.canonical_mask"), std::string::npos) << e.what();
  }
}

TEST(CanonicalMaskBuild, BackgroundBuildEqualsDirectBuild) {
  const Gpt2Tokenizer& tok = gpt2_tokenizer();
  const CanonicalMaskOptions tier0_only{.tier0 = true, .tier1 = false};
  CanonicalMaskBuild build(tok, tier0_only);
  const CanonicalMask& mask = build.wait();
  EXPECT_TRUE(build.done());
  const CanonicalMask direct = build_canonical_mask(tok, tier0_only);
  EXPECT_TRUE(std::equal(mask.bytes().begin(), mask.bytes().end(), direct.bytes().begin()));
  EXPECT_EQ(&build.wait(), &mask);  // a second wait returns the same mask
  EXPECT_GE(build.build_seconds(), 0.0);
}

TEST(CanonicalMaskBuild, BroadcastFromRankZeroOverTwoThreadRanks) {
  const CanonicalMaskOptions tier0_only{.tier0 = true, .tier1 = false};
  CanonicalMaskBuild build(gpt2_tokenizer(), tier0_only);
  std::vector<Tensor> masks(2);
  test::run_thread_ranks(2, [&](int rank, Comm& comm) {
    masks[static_cast<size_t>(rank)] = broadcast_canonical_mask(rank == 0 ? &build : nullptr, comm);
  });
  const CanonicalMask& expected = build.wait();
  for (const Tensor& m : masks) {
    ASSERT_EQ(m.shape(), (std::vector<int64_t>{kCanonicalMaskVocab, kCanonicalMaskRowBytes}));
    EXPECT_EQ(std::memcmp(m.raw(), expected.bytes().data(), expected.bytes().size()), 0);
  }
  const auto single = make_single_rank_comm();
  EXPECT_THROW(broadcast_canonical_mask(nullptr, *single), Error);  // rank 0 without its build
}

TEST(CanonicalMaskBuild, DestructorStopsARunningBuild) {
  // Destroyed right after the start (as when the run fails early): the destructor cancels and joins (a thread left
  // joinable would end the process), and the cancellation error stays inside.
  const auto begin = std::chrono::steady_clock::now();
  { CanonicalMaskBuild build(gpt2_tokenizer()); }
  SUCCEED() << std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() << " s";
}

TEST(CanonicalMaskBuild, CancelledBuildReportsItself) {
  std::atomic<bool> cancel{true};
  EXPECT_THROW(
      {
        try {
          build_canonical_mask(gpt2_tokenizer(), {}, &cancel);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace gpt
