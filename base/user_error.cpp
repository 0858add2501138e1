#include "base/user_error.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace gpt {
namespace {

// Whether `text` is "path/file.cpp:LINE" (a source location as GPT_CHECK writes it).
bool is_source_location(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) return false;
  if (text.find_first_not_of("0123456789", colon + 1) != std::string_view::npos) return false;
  const std::string_view path = text.substr(0, colon);
  if (path.find_first_of(" []") != std::string_view::npos) return false;
  for (const std::string_view ext : {".cpp", ".h", ".cu", ".cuh", ".hpp"}) {
    if (path.size() > ext.size() && path.substr(path.size() - ext.size()) == ext) return true;
  }
  return false;
}

// Length of the well-formed UTF-8 sequence at text[at], or 0 when the bytes there are not one.
size_t utf8_sequence(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  const size_t length = lead >= 0xc2 && lead <= 0xdf   ? 2
                        : lead >= 0xe0 && lead <= 0xef ? 3
                        : lead >= 0xf0 && lead <= 0xf4 ? 4
                                                       : 0;
  if (length == 0 || at + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xc0) != 0x80) return 0;
  }
  if ((lead == 0xe0 && byte(at + 1) < 0xa0) || (lead == 0xed && byte(at + 1) > 0x9f) ||
      (lead == 0xf0 && byte(at + 1) < 0x90) || (lead == 0xf4 && byte(at + 1) > 0x8f)) {
    return 0;  // overlong, a surrogate, or beyond U+10FFFF
  }
  return length;
}

// The JSON library prefixes its messages with an error id ("[json.exception.parse_error.101] "): the user reads the
// line and column after it, not the id.
std::string without_json_error_ids(std::string text) {
  constexpr std::string_view kTag = "[json.exception.";
  for (size_t open = text.find(kTag); open != std::string::npos; open = text.find(kTag, open)) {
    const size_t close = text.find(']', open);
    if (close == std::string::npos) break;
    const size_t end = close + 1 < text.size() && text[close + 1] == ' ' ? close + 2 : close + 1;
    text.erase(open, end - open);
  }
  return text;
}

}  // namespace

std::string printable_text(std::string_view text) {
  std::string out;
  for (size_t at = 0; at < text.size();) {
    const auto c = static_cast<unsigned char>(text[at]);
    const size_t length = utf8_sequence(text, at);
    if (length == 0 || (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
      ++at;
      continue;
    }
    out.append(text.substr(at, length));
    at += length;
  }
  return out;
}

std::string user_error_message(const std::string& raw, bool keep_source_locations) {
  const std::string what = without_json_error_ids(printable_text(raw));
  if (keep_source_locations) return what;
  // GPT_CHECK appends " [path/file.cpp:LINE]"; nested errors carry theirs inside the message.
  std::string out;
  size_t at = 0;
  while (at < what.size()) {
    const size_t open = what.find(" [", at);
    const size_t close = open == std::string::npos ? std::string::npos : what.find(']', open + 2);
    if (close == std::string::npos) break;
    const bool location = is_source_location(std::string_view(what).substr(open + 2, close - open - 2));
    out.append(what, at, location ? open - at : close + 1 - at);
    at = close + 1;
  }
  out.append(what, std::min(at, what.size()), std::string::npos);
  return out;
}

}  // namespace gpt
