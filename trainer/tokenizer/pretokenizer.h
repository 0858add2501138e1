#pragma once
// The GPT-2 pre-tokenizer: splits text into the pieces that BPE encodes independently.
//
// Hand-coded equivalent of the regex (leftmost alternative wins at each position, as in a backtracking
// engine)
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with the classes of unicode_class.h. Invalid UTF-8 bytes are single "other" characters.
#include <cstddef>
#include <string_view>

namespace gpt {

// End (exclusive byte offset) of the piece that starts at text[pos]; requires pos < text.size().
size_t gpt2_piece_end(std::string_view text, size_t pos);

// Calls visit(std::string_view piece) for each piece of text in order; the pieces concatenate to text.
template <typename Visitor>
void for_each_gpt2_piece(std::string_view text, Visitor&& visit) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = gpt2_piece_end(text, pos);
    visit(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace gpt
