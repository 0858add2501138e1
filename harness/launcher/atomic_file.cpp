#include "harness/launcher/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "harness/launcher/safe_files.h"
#include "base/check.h"

namespace gpt::harness {

void write_text_atomically(const std::filesystem::path& path, std::string_view text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    // Not through a planted link: the rename below replaces a link at `path` itself rather than following it.
    const int fd = open_without_following(tmp, O_WRONLY | O_CREAT | O_TRUNC);
    std::size_t written = 0;
    int err = 0;
    while (written < text.size()) {
      const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        err = n < 0 ? errno : EIO;
        break;
      }
      written += static_cast<std::size_t>(n);
    }
    ::close(fd);
    GPT_CHECK(err == 0, "cannot write '", tmp.string(), "': ", std::strerror(err), " (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  GPT_CHECK(!ec, "cannot move '", tmp.string(), "' into place at '", path.string(), "': ", ec.message());
}

}  // namespace gpt::harness
