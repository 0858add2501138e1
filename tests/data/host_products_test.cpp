// Bigram hash and sign rows (RECIPE §2.5.2) and cu_seqlens tables (§1.4, §6, §S.1).
#include "trainer/data/host_products.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/check.h"
#include "trainer/data/shard.h"

namespace gpt {
namespace {

using ::testing::HasSubstr;
using I32 = std::vector<std::int32_t>;
using I64 = std::vector<std::int64_t>;

// Expected values below were computed independently (arbitrary-precision integers reduced to int32).
TEST(BigramHash, WrapOfReservedRowProduct) {
  // 27191·377279 = 10258493689 wraps to 1668658697; with x_1 = 0 the hash is that value mod M.
  EXPECT_EQ(bigram_row_ids(I32{50256, 0}, 377279), (I32{377279, 1668658697 % 377279}));
}

TEST(BigramHash, HeadExamplesUseReservedValueForP1) {
  const I32 x = {50256, 464, 2068, 50256, 13, 0};
  EXPECT_EQ(bigram_row_ids(x, 377279), (I32{377279, 86771, 28822, 88511, 83163, 353483}));
  // h_1 uses p_1 = M, not x_0: (36313·464) XOR 1668658697 = 1651814233, mod M = 86771.
  EXPECT_EQ(1651814233 % 377279, 86771);
}

TEST(BigramHash, TinyModulus) {
  const I32 x = {50256, 464, 2068, 50256, 13, 0};
  EXPECT_EQ(bigram_row_ids(x, 50303), (I32{50303, 40963, 30187, 45316, 6100, 1362}));
}

TEST(BigramHash, NegativeProductUsesFloorModulo) {
  // 36313·60000 wraps to -2116187296; XOR with 1668658697 gives -492290711, floor-mod M = 58384.
  const I32 x = {5, 60000, 7};
  EXPECT_EQ(bigram_row_ids(x, 377279), (I32{377279, 58384, 97331}));
}

TEST(BigramHash, FirstPositionIsReservedRowEvenForBos) {
  EXPECT_EQ(bigram_row_ids(I32{123}, 377279), (I32{377279}));
  EXPECT_TRUE(bigram_row_ids(I32{}, 377279).empty());
}

TEST(BigramHash, BosHashesWithPreviousDocumentsLastToken) {
  // Position 3 is a BOS; its hash depends on x_2 (no masking at document boundaries).
  const I32 a = {1, 2, 3, 50256};
  const I32 b = {1, 2, 4, 50256};
  EXPECT_NE(bigram_row_ids(a, 377279)[3], bigram_row_ids(b, 377279)[3]);
}

TEST(BigramHash, RejectsBadArguments) {
  EXPECT_THROW((void)bigram_row_ids(I32{1, 2}, 0), Error);
  I32 out(1);
  EXPECT_THROW(bigram_row_ids(I32{1, 2}, 5, out), Error);
}

TEST(BigramSign, XorModulo8192) {
  const I32 x = {50256, 464, 2068, 50256, 13, 0};
  EXPECT_EQ(bigram_sign_rows(x), (I32{0, 1408, 2500, 3140, 1117, 13}));
}

TEST(CuSeqlensRows, TableAndFormula) {
  EXPECT_EQ(default_cu_seqlens_rows(16384), 64);
  EXPECT_EQ(default_cu_seqlens_rows(32768), 96);
  EXPECT_EQ(default_cu_seqlens_rows(49152), 128);
  EXPECT_EQ(default_cu_seqlens_rows(40960), 256);  // ⌊40960/300⌋ = 136 -> 2 blocks of 128
  EXPECT_EQ(default_cu_seqlens_rows(38400), 128);  // 128 exactly
  EXPECT_EQ(default_cu_seqlens_rows(38700), 256);  // 129
  EXPECT_EQ(default_cu_seqlens_rows(512), 128);    // tiny
  EXPECT_EQ(default_cu_seqlens_rows(100), 128);    // floor of 128 rows
  EXPECT_THROW((void)default_cu_seqlens_rows(0), Error);
}

TEST(TrainingCuSeqlens, LastPieceShortenedAndPadded) {
  // Pieces 5 + 3 + 4 = 12 = T + 1 with T = 11: segments 5, 3, 3.
  EXPECT_EQ(training_cu_seqlens(I64{5, 3, 4}, 6), (I32{0, 5, 8, 11, 11, 11}));
}

TEST(TrainingCuSeqlens, LastPieceOfLengthOneGivesEmptySegment) {
  EXPECT_EQ(training_cu_seqlens(I64{5, 6, 1}, 5), (I32{0, 5, 11, 11, 11}));
}

TEST(TrainingCuSeqlens, SinglePiece) { EXPECT_EQ(training_cu_seqlens(I64{9}, 3), (I32{0, 8, 8})); }

TEST(TrainingCuSeqlens, ErrorWhenSegmentsReachRows) {
  // Three segments need four entries: R = 4 fits, R = 3 does not (n >= R).
  EXPECT_EQ(training_cu_seqlens(I64{2, 2, 2}, 4), (I32{0, 2, 4, 5}));
  try {
    (void)training_cu_seqlens(I64{2, 2, 2}, 3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("3 segments do not fit a table of 3 rows"));
  }
}

TEST(TrainingCuSeqlens, SegmentCapAddsBoundariesInsideLongSegments) {
  // Segments 10, 4, 7 (last piece 8 shortened); cap 4: 10 -> 4+4+2, 4 stays, 7 -> 4+3.
  EXPECT_EQ(training_cu_seqlens(I64{10, 4, 8}, 10, 4), (I32{0, 4, 8, 10, 14, 18, 21, 21, 21, 21}));
  // A cap larger than every segment changes nothing.
  EXPECT_EQ(training_cu_seqlens(I64{10, 4, 8}, 5, 64), training_cu_seqlens(I64{10, 4, 8}, 5));
  EXPECT_THROW((void)training_cu_seqlens(I64{10, 4, 8}, 6, 4), Error);
}

TEST(TrainingCuSeqlens, RejectsBadPieces) {
  EXPECT_THROW((void)training_cu_seqlens(I64{}, 4), Error);
  EXPECT_THROW((void)training_cu_seqlens(I64{3, 0, 2}, 4), Error);
  EXPECT_THROW((void)training_cu_seqlens(I64{1}, 4), Error);  // T = 0
}

TEST(ValidationCuSeqlens, BosAtStartGivesEmptyFirstSegment) {
  const I32 x = {50256, 1, 2, 50256, 3, 4, 5, 50256};
  EXPECT_EQ(validation_cu_seqlens(x, 7), (I32{0, 0, 3, 7, 8, 8, 8}));
}

TEST(ValidationCuSeqlens, TokensBeforeFirstBosFormContextlessSegment) {
  const I32 x = {7, 8, 50256, 9};
  EXPECT_EQ(validation_cu_seqlens(x, 4), (I32{0, 2, 4, 4}));
  EXPECT_EQ(validation_cu_seqlens(I32{1, 2, 3}, 2), (I32{0, 3}));
  EXPECT_THROW((void)validation_cu_seqlens(x, 2), Error);
}

TEST(LongestSegment, IgnoresPadding) {
  EXPECT_EQ(longest_segment(I32{0, 5, 8, 11, 11, 11}), 5);
  EXPECT_EQ(longest_segment(I32{0, 0, 3, 7, 8}), 4);
}

}  // namespace
}  // namespace gpt
