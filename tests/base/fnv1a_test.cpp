// base/fnv1a.h: FNV-1a 64 against the published test vectors. Recipe hashes, corpus fingerprints, checkpoint
// checksums and stored run checksums depend on these exact values.
#include "base/fnv1a.h"

#include <gtest/gtest.h>

namespace gpt {
namespace {

TEST(Fnv1a64, KnownVectors) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(Fnv1a64, HighBytesAreUnsigned) {
  // A sign-extended char would fold 0xffffffffffffffff instead of 0xff.
  EXPECT_EQ(fnv1a64(std::string_view("\x00\xff", 2)), 0x0831c907b4ea2b60ull);
}

// The basis of the recipe hash and the database checksums (one decimal digit short of the FNV basis): stored
// hashes were made with it, so its results must not move.
TEST(Fnv1a64, StoredHashBasisKeepsItsValues) {
  EXPECT_EQ(kFnv1a64StoredHashBasis, 1469598103934665603ull);
  EXPECT_EQ(fnv1a64("", kFnv1a64StoredHashBasis), 1469598103934665603ull);
  EXPECT_EQ(fnv1a64_hex("a", kFnv1a64StoredHashBasis), "44bd8ad473cd9906");
  EXPECT_NE(kFnv1a64StoredHashBasis, kFnv1a64OffsetBasis);
}

TEST(Fnv1a64, PiecesFoldLikeTheWhole) {
  EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar"));
  EXPECT_EQ(fnv1a64("", fnv1a64("a")), fnv1a64("a"));
}

TEST(Fnv1a64, IsConstexpr) {
  static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  static_assert(fnv1a64("") == kFnv1a64OffsetBasis);
}

TEST(Fnv1a64, HexIsSixteenLowerCaseDigits) {
  EXPECT_EQ(fnv1a64_hex(""), "cbf29ce484222325");
  EXPECT_EQ(fnv1a64_hex("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(hex64(0), "0000000000000000");
  EXPECT_EQ(hex64(0xabcull), "0000000000000abc");
  EXPECT_EQ(hex64(~0ull), "ffffffffffffffff");
}

}  // namespace
}  // namespace gpt
