#include "base/file_read.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "base/check.h"

namespace gpt {

std::optional<std::string> try_read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return std::nullopt;
  // istream::read, not `out << in.rdbuf()`: that one turns a failed read (a folder: EISDIR) into an empty text.
  std::string contents;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk), in.gcount() > 0) contents.append(chunk, static_cast<size_t>(in.gcount()));
  if (in.bad()) return std::nullopt;
  return contents;
}

std::string read_file(const std::filesystem::path& path, std::string_view what) {
  errno = 0;
  std::optional<std::string> bytes = try_read_file(path);
  if (!bytes) {
    const int error = errno;
    GPT_FAIL("cannot read ", what, " '", path.string(), "' (", error != 0 ? std::strerror(error) : "read error", ")");
  }
  return std::move(*bytes);
}

}  // namespace gpt
