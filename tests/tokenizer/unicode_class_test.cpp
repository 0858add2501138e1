#include "trainer/tokenizer/unicode_class.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/tokenizer/tokenizer_test_util.h"

namespace gpt {
namespace {

using testing::utf8;

constexpr CharClass kL = CharClass::kLetter;
constexpr CharClass kN = CharClass::kNumber;
constexpr CharClass kS = CharClass::kSpace;
constexpr CharClass kO = CharClass::kOther;

TEST(UnicodeClass, TablesAreUnicode15) { EXPECT_EQ(unicode_tables_version(), "15.0.0"); }

TEST(UnicodeClass, Ascii) {
  EXPECT_EQ(char_class(U'a'), kL);
  EXPECT_EQ(char_class(U'Z'), kL);
  EXPECT_EQ(char_class(U'0'), kN);
  EXPECT_EQ(char_class(U'9'), kN);
  for (const char32_t space : {U' ', U'\t', U'\n', U'\v', U'\f', U'\r'}) EXPECT_EQ(char_class(space), kS);
  for (const char32_t other : {U'\0', U'\'', U'_', U'-', U'.', U'~', char32_t{0x1C}, char32_t{0x7F}}) {
    EXPECT_EQ(char_class(other), kO) << static_cast<uint32_t>(other);
  }
}

TEST(UnicodeClass, WhiteSpacePropertyNotJustAscii) {
  for (const uint32_t cp : {0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u}) {
    EXPECT_EQ(char_class(cp), kS) << std::hex << cp;
  }
  // Format characters that look like spaces are not White_Space.
  for (const uint32_t cp : {0x200Bu, 0x200Eu, 0x2060u, 0xFEFFu, 0x180Eu})
    EXPECT_EQ(char_class(cp), kO) << std::hex << cp;
}

TEST(UnicodeClass, LettersOfAllCategories) {
  EXPECT_EQ(char_class(0xE9), kL);     // é, Ll
  EXPECT_EQ(char_class(0x01C5), kL);   // Dž, Lt
  EXPECT_EQ(char_class(0x02B0), kL);   // modifier letter small h, Lm
  EXPECT_EQ(char_class(0x05D0), kL);   // Hebrew alef, Lo
  EXPECT_EQ(char_class(0x3042), kL);   // Hiragana a
  EXPECT_EQ(char_class(0x10400), kL);  // Deseret, astral Lu
}

TEST(UnicodeClass, RangeEntriesOfUnicodeDataAreExpanded) {
  // UnicodeData.txt lists these blocks as <..., First>/<..., Last> pairs.
  for (const uint32_t cp : {0x3400u, 0x4DBFu, 0x4E00u, 0x6C34u, 0x9FFFu, 0xAC00u, 0xD7A3u, 0x20000u, 0x2A6DFu, 0x17000u,
                            0x187F7u, 0x31350u, 0x323AFu}) {
    EXPECT_EQ(char_class(cp), kL) << std::hex << cp;
  }
  for (const uint32_t cp : {0x2A6E0u, 0x323B0u, 0xD7A4u}) EXPECT_EQ(char_class(cp), kO) << std::hex << cp;
}

TEST(UnicodeClass, NumbersOfAllCategories) {
  EXPECT_EQ(char_class(0x0660), kN);   // Arabic-Indic zero, Nd
  EXPECT_EQ(char_class(0x2160), kN);   // Roman numeral one, Nl
  EXPECT_EQ(char_class(0x00B2), kN);   // superscript two, No
  EXPECT_EQ(char_class(0x00BD), kN);   // one half, No
  EXPECT_EQ(char_class(0x1D7CE), kN);  // mathematical bold digit zero, astral Nd
}

TEST(UnicodeClass, Others) {
  EXPECT_EQ(char_class(0x0301), kO);    // combining acute accent, Mn
  EXPECT_EQ(char_class(0x1F600), kO);   // emoji, So
  EXPECT_EQ(char_class(0x20AC), kO);    // euro sign, Sc
  EXPECT_EQ(char_class(0xE000), kO);    // private use
  EXPECT_EQ(char_class(0xD800), kO);    // surrogate
  EXPECT_EQ(char_class(0x10FFFF), kO);  // noncharacter
  EXPECT_EQ(char_class(0x110000), kO);  // beyond Unicode
  EXPECT_EQ(char_class(kInvalidUtf8), kO);
}

Utf8Char decode_at(const std::string& text, size_t pos = 0) { return next_utf8_char(text, pos); }

TEST(Utf8Decoding, WellFormedSequencesOfEachLength) {
  for (const uint32_t cp : {0x41u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    const std::string text = utf8(cp) + "x";
    const Utf8Char c = decode_at(text);
    EXPECT_EQ(c.code_point, cp) << std::hex << cp;
    EXPECT_EQ(c.length, utf8(cp).size()) << std::hex << cp;
  }
  EXPECT_EQ(decode_at("\xE6\x97\xA5").cls, kL);  // 日
}

TEST(Utf8Decoding, IllFormedBytesAreSingleOtherCharacters) {
  const char* ill_formed[] = {
      "\x80",              // lone continuation byte
      "\xBF",              //
      "\xC0\x80",          // overlong NUL
      "\xC1\xBF",          // overlong
      "\xE0\x80\x80",      // overlong 3-byte
      "\xE0\x9F\xBF",      // overlong 3-byte (U+07FF)
      "\xED\xA0\x80",      // surrogate U+D800
      "\xED\xBF\xBF",      // surrogate U+DFFF
      "\xF0\x80\x80\x80",  // overlong 4-byte
      "\xF0\x8F\xBF\xBF",  // overlong 4-byte (U+FFFF)
      "\xF4\x90\x80\x80",  // U+110000
      "\xF5\x80\x80\x80",  // lead byte beyond Unicode
      "\xFF",              //
      "\xC3",              // truncated 2-byte
      "\xE6\x97",          // truncated 3-byte
      "\xF0\x9F\x98",      // truncated 4-byte
      "\xC3\x41",          // lead byte followed by ASCII
      "\xE6\x41\xA5",      // continuation missing in the middle
  };
  for (const char* bytes : ill_formed) {
    const Utf8Char c = decode_at(bytes);
    EXPECT_EQ(c.code_point, kInvalidUtf8) << ::testing::PrintToString(std::string(bytes));
    EXPECT_EQ(c.length, 1u);
    EXPECT_EQ(c.cls, kO);
  }
}

TEST(Utf8Decoding, DecodesInsideAString) {
  const std::string text = "a\xC3\xA9\x80" + utf8(0x1F600);
  EXPECT_EQ(decode_at(text, 1).code_point, 0xE9u);
  EXPECT_EQ(decode_at(text, 3).code_point, kInvalidUtf8);
  EXPECT_EQ(decode_at(text, 4).code_point, 0x1F600u);
  EXPECT_EQ(decode_at(text, 4).length, 4u);
}

}  // namespace
}  // namespace gpt
