#include "trainer/tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/tokenizer/tokenizer_test_util.h"

namespace gpt {
namespace {

using testing::utf8;

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for_each_gpt2_piece(text, [&](std::string_view piece) { out.emplace_back(piece); });
  return out;
}

using Pieces = std::vector<std::string>;

TEST(Gpt2PreTokenizer, EmptyTextHasNoPieces) { EXPECT_TRUE(pieces("").empty()); }

TEST(Gpt2PreTokenizer, WordsTakeTheirLeadingSpace) {
  EXPECT_EQ(pieces("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces(" leading"), (Pieces{" leading"}));
  EXPECT_EQ(pieces("GPT-2."), (Pieces{"GPT", "-", "2", "."}));
}

TEST(Gpt2PreTokenizer, NumbersAndPunctuationRuns) {
  EXPECT_EQ(pieces("1,000,000"), (Pieces{"1", ",", "000", ",", "000"}));
  EXPECT_EQ(pieces(" 123abc"), (Pieces{" 123", "abc"}));
  EXPECT_EQ(pieces("$$ !!?"), (Pieces{"$$", " !!?"}));
  EXPECT_EQ(pieces("x**2"), (Pieces{"x", "**", "2"}));
}

TEST(Gpt2PreTokenizer, Contractions) {
  EXPECT_EQ(pieces("it's"), (Pieces{"it", "'s"}));
  EXPECT_EQ(pieces("we'll've"), (Pieces{"we", "'ll", "'ve"}));
  EXPECT_EQ(pieces("I'm you're she'd don't"), (Pieces{"I", "'m", " you", "'re", " she", "'d", " don", "'t"}));
  EXPECT_EQ(pieces("'sup"), (Pieces{"'s", "up"}));  // the regex does not require a word boundary
}

TEST(Gpt2PreTokenizer, ContractionsAreCaseSensitiveAndOnlyStartAPiece) {
  EXPECT_EQ(pieces("DON'T"), (Pieces{"DON", "'", "T"}));
  EXPECT_EQ(pieces("x''s"), (Pieces{"x", "''", "s"}));  // second apostrophe is inside a punctuation run
  EXPECT_EQ(pieces(" 's"), (Pieces{" '", "s"}));
  EXPECT_EQ(pieces("'l"), (Pieces{"'", "l"}));
  EXPECT_EQ(pieces("'"), (Pieces{"'"}));
}

TEST(Gpt2PreTokenizer, WhitespaceRunsLeaveTheirLastCharacterToTheNextWord) {
  EXPECT_EQ(pieces("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(pieces("a  \n b"), (Pieces{"a", "  \n", " b"}));
  EXPECT_EQ(pieces("a\n\n\nb"), (Pieces{"a", "\n\n", "\n", "b"}));
  EXPECT_EQ(pieces("a\r\nb"), (Pieces{"a", "\r", "\n", "b"}));
  EXPECT_EQ(pieces("\tx"), (Pieces{"\t", "x"}));
}

TEST(Gpt2PreTokenizer, TrailingWhitespaceIsOnePiece) {
  EXPECT_EQ(pieces("x   "), (Pieces{"x", "   "}));
  EXPECT_EQ(pieces("   \n  \n"), (Pieces{"   \n  \n"}));
  EXPECT_EQ(pieces(" "), (Pieces{" "}));
}

TEST(Gpt2PreTokenizer, OnlyAsciiSpaceIsTheOptionalPrefix) {
  const std::string nbsp = utf8(0xA0);
  const std::string ideographic_space = utf8(0x3000);
  EXPECT_EQ(pieces(nbsp + "word"), (Pieces{nbsp, "word"}));
  EXPECT_EQ(pieces("a" + ideographic_space + ideographic_space + "b"),
            (Pieces{"a", ideographic_space, ideographic_space, "b"}));
  EXPECT_EQ(pieces("a " + nbsp + "b"), (Pieces{"a", " ", nbsp, "b"}));
}

TEST(Gpt2PreTokenizer, UnicodeClasses) {
  const std::string e_acute = utf8(0xE9);
  const std::string combining_acute = utf8(0x301);
  EXPECT_EQ(pieces("caf" + e_acute + " na"), (Pieces{"caf" + e_acute, " na"}));
  // A combining mark is neither letter nor number: it splits the word.
  EXPECT_EQ(pieces("e" + combining_acute + "t"), (Pieces{"e", combining_acute, "t"}));
  const std::string japanese = utf8(0x65E5) + utf8(0x672C) + utf8(0x8A9E);
  EXPECT_EQ(pieces(" " + japanese + "!"), (Pieces{" " + japanese, "!"}));
  const std::string roman_two = utf8(0x2161);
  EXPECT_EQ(pieces("x" + roman_two + "2"), (Pieces{"x", roman_two + "2"}));
  const std::string emoji = utf8(0x1F600);
  EXPECT_EQ(pieces("hi " + emoji + emoji + "."), (Pieces{"hi", " " + emoji + emoji + "."}));
  const std::string zwsp = utf8(0x200B);  // zero width space is not White_Space
  EXPECT_EQ(pieces("a b" + zwsp + "c"), (Pieces{"a", " b", zwsp, "c"}));
}

TEST(Gpt2PreTokenizer, InvalidBytesJoinPunctuationRuns) {
  EXPECT_EQ(pieces("ab\xFF\xFE"
                   "cd"),
            (Pieces{"ab", "\xFF\xFE", "cd"}));
  EXPECT_EQ(pieces(" \xFF"), (Pieces{" \xFF"}));
  EXPECT_EQ(pieces("caf\xC3"), (Pieces{"caf", "\xC3"}));
  EXPECT_EQ(pieces("\xE2\x82"
                   "1"),
            (Pieces{"\xE2\x82", "1"}));
  EXPECT_EQ(pieces("x\xED\xA0\x80."), (Pieces{"x", "\xED\xA0\x80."}));  // encoded surrogate: 3 invalid bytes
}

TEST(Gpt2PreTokenizer, PiecesConcatenateToTheInputForRandomBytes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text(rng() % 64, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 2 ? rng() % 256 : " a1\n'.\xC3\xA9"[rng() % 9]);
    std::string joined;
    for (const std::string& piece : pieces(text)) {
      EXPECT_FALSE(piece.empty());
      joined += piece;
    }
    EXPECT_EQ(joined, text);
  }
}

}  // namespace
}  // namespace gpt
