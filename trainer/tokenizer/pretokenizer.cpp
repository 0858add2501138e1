#include "trainer/tokenizer/pretokenizer.h"

#include "trainer/tokenizer/unicode_class.h"

namespace gpt {
namespace {

// Length of the contraction suffix ("s", "t", "re", "ve", "m", "ll", "d") right after an apostrophe at
// text[pos - 1], or 0 when none matches. Case-sensitive, like the regex.
size_t contraction_suffix_length(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  const char first = text[pos];
  if (first == 's' || first == 't' || first == 'm' || first == 'd') return 1;
  if (pos + 1 >= text.size()) return 0;
  const char second = text[pos + 1];
  if ((first == 'r' || first == 'v') && second == 'e') return 2;
  if (first == 'l' && second == 'l') return 2;
  return 0;
}

// End of the maximal run of characters of class cls starting at pos (text[pos] is known to be in it).
size_t run_end(std::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    const Utf8Char c = next_utf8_char(text, pos);
    if (c.cls != cls) break;
    pos += c.length;
  }
  return pos;
}

}  // namespace

size_t gpt2_piece_end(std::string_view text, size_t pos) {
  const Utf8Char first = next_utf8_char(text, pos);

  // 's|'t|'re|'ve|'m|'ll|'d
  if (first.code_point == U'\'') {
    if (const size_t suffix = contraction_suffix_length(text, pos + 1)) return pos + 1 + suffix;
  }

  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the optional space (U+0020 only) belongs to the run
  // of the character after it when that character is not whitespace.
  if (first.cls != CharClass::kSpace) return run_end(text, pos + first.length, first.cls);
  if (first.code_point == U' ' && pos + 1 < text.size()) {
    const Utf8Char second = next_utf8_char(text, pos + 1);
    if (second.cls != CharClass::kSpace) return run_end(text, pos + 1 + second.length, second.cls);
  }

  // `\s+(?!\S)|\s+`: the whole whitespace run at the end of the text; before a non-space character,
  // the run minus its last character (which then prefixes the next word), or a single character
  // when the run has only one.
  size_t last_char_start = pos;
  size_t end = pos + first.length;
  while (end < text.size()) {
    const Utf8Char c = next_utf8_char(text, end);
    if (c.cls != CharClass::kSpace) break;
    last_char_start = end;
    end += c.length;
  }
  if (end == text.size()) return end;
  if (last_char_start > pos) return last_char_start;
  return end;
}

}  // namespace gpt
