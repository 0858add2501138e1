#include "harness/launcher/safe_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "base/check.h"

namespace gpt::harness {

namespace {

struct DirFd {
  int fd = -1;
  explicit DirFd(int f) : fd(f) {}
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
  DirFd(DirFd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  DirFd& operator=(DirFd&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~DirFd() {
    if (fd >= 0) ::close(fd);
  }
};

bool is_symlink_at(int dir, const char* name) {
  struct stat st {};
  return ::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

}  // namespace

void make_folders_below(const std::filesystem::path& root, const std::filesystem::path& relative) {
  GPT_CHECK(relative.is_relative(), "internal: '", relative.string(), "' should be relative to '", root.string(), "'");
  std::error_code ec;
  std::filesystem::create_directories(root.empty() ? "." : root, ec);
  DirFd dir(::open(root.empty() ? "." : root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  GPT_CHECK(dir.fd >= 0, "cannot open the output folder '", root.string(), "': ", std::strerror(errno));
  std::filesystem::path done = root;
  for (const auto& part : relative) {
    const std::string name = part.string();
    if (name.empty() || name == ".") continue;
    GPT_CHECK(name != "..", "internal: '", relative.string(), "' climbs out of '", root.string(), "'");
    done /= part;
    if (::mkdirat(dir.fd, name.c_str(), 0755) != 0) {
      GPT_CHECK(errno == EEXIST, "cannot create the folder '", done.string(), "': ", std::strerror(errno));
    }
    DirFd next(::openat(dir.fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.fd < 0) {
      const int err = errno;
      GPT_CHECK(!is_symlink_at(dir.fd, name.c_str()), "'", done.string(),
                "' is a symbolic link; refusing to write run outputs or reports through it (remove it)");
      GPT_FAIL("cannot open the folder '", done.string(), "': ", std::strerror(err));
    }
    dir = std::move(next);
  }
}

int open_without_following(const std::filesystem::path& path, int flags, mode_t mode) {
  const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd >= 0) return fd;
  const int err = errno;
  std::error_code ec;
  GPT_CHECK(!std::filesystem::is_symlink(path, ec), "'", path.string(),
            "' is a symbolic link; refusing to write through it (remove it)");
  GPT_FAIL("cannot open '", path.string(), "': ", std::strerror(err));
}

void empty_folder(const std::filesystem::path& dir, const std::vector<std::string>& keep) {
  std::error_code ec;
  if (!std::filesystem::is_directory(std::filesystem::symlink_status(dir, ec))) return;
  std::vector<std::filesystem::path> entries;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (std::find(keep.begin(), keep.end(), entry.path().filename().string()) == keep.end()) {
      entries.push_back(entry.path());
    }
  }
  GPT_CHECK(!ec, "cannot list the run folder '", dir.string(), "': ", ec.message());
  for (const auto& path : entries) {
    std::filesystem::remove_all(path, ec);  // removes a link, not its target
    GPT_CHECK(!ec, "cannot remove '", path.string(), "' from the run folder for a fresh attempt: ", ec.message());
  }
}

}  // namespace gpt::harness
