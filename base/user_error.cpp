#include "base/user_error.h"

#include <algorithm>
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

}  // namespace

std::string user_error_message(const std::string& what, bool keep_source_locations) {
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
