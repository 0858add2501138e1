#pragma once
// Shared by the tokenizer tests: the real GPT-2 tokenizer, found like every program finds it.
#include <string>

#include "trainer/tokenizer/gpt2_tokenizer.h"

namespace gpt::testing {

// Loads the tokenizer from Gpt2Tokenizer::default_ranks_path() once. A missing ranks file throws
// gpt::Error ("... run scripts/fetch-tokenizer ..."), which fails the calling test with that message.
inline const Gpt2Tokenizer& gpt2_tokenizer() {
  static const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::load_default();
  return tokenizer;
}

// UTF-8 encoding of one code point (test inputs are built from code points).
inline std::string utf8(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

}  // namespace gpt::testing
