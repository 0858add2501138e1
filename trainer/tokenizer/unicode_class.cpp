#include "trainer/tokenizer/unicode_class.h"

#include <algorithm>
#include <iterator>

namespace gpt {
namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;  // inclusive
  CharClass cls;
};

constexpr CharClass L = CharClass::kLetter;
constexpr CharClass N = CharClass::kNumber;
constexpr CharClass S = CharClass::kSpace;

#include "trainer/tokenizer/unicode_tables.inc"

constexpr bool ranges_sorted_and_disjoint() {
  for (size_t i = 0; i < std::size(kCodePointRanges); ++i) {
    if (kCodePointRanges[i].first > kCodePointRanges[i].last) return false;
    if (i > 0 && kCodePointRanges[i - 1].last >= kCodePointRanges[i].first) return false;
  }
  return true;
}
static_assert(ranges_sorted_and_disjoint(), "unicode_tables.inc must hold sorted, disjoint ranges");

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

CharClass char_class(char32_t code_point) {
  if (code_point < 0x80) return detail::kAsciiClass[code_point];
  // First range whose last code point is >= code_point; the code point is in it if first <= code_point.
  const auto* it = std::lower_bound(std::begin(kCodePointRanges), std::end(kCodePointRanges), code_point,
                                    [](const CodePointRange& r, char32_t cp) { return r.last < cp; });
  if (it != std::end(kCodePointRanges) && it->first <= code_point) return it->cls;
  return CharClass::kOther;
}

std::string_view unicode_tables_version() { return kUnicodeVersion; }

namespace detail {

Utf8Char decode_multibyte_utf8(std::string_view text, size_t pos) {
  const Utf8Char invalid{kInvalidUtf8, 1, CharClass::kOther};
  const auto byte_at = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const size_t available = text.size() - pos;
  const unsigned char lead = byte_at(0);
  uint32_t length = 0;
  unsigned char second_min = 0x80;
  unsigned char second_max = 0xBF;
  char32_t code_point = 0;
  // Well-formed sequences per Unicode Table 3-7; the second byte's range excludes overlong forms,
  // surrogates (ED A0..BF) and values above U+10FFFF (F4 90..).
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code_point = lead & 0x0F;
    if (lead == 0xE0) second_min = 0xA0;
    if (lead == 0xED) second_max = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code_point = lead & 0x07;
    if (lead == 0xF0) second_min = 0x90;
    if (lead == 0xF4) second_max = 0x8F;
  } else {
    return invalid;
  }
  if (available < length) return invalid;
  const unsigned char second = byte_at(1);
  if (second < second_min || second > second_max) return invalid;
  for (uint32_t i = 1; i < length; ++i) {
    const unsigned char byte = byte_at(i);
    if (!is_continuation(byte)) return invalid;
    code_point = (code_point << 6) | (byte & 0x3F);
  }
  return {code_point, length, char_class(code_point)};
}

}  // namespace detail
}  // namespace gpt
