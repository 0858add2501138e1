#include "harness/launcher/slurm_util.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/commands/subprocess.h"
#include "base/check.h"

namespace gpt::harness::slurm {

namespace {

// A temporary file removed when the object goes out of scope.
class TempFile {
 public:
  TempFile() {
    char name[] = "/tmp/harness-slurm-XXXXXX";
    const int fd = mkstemp(name);
    GPT_CHECK(fd >= 0, "slurm launcher: cannot create a temporary file: ", std::strerror(errno));
    ::close(fd);
    path_ = name;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string read() const {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace

std::string shell_word(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                              "-_./=:,+@%") == std::string::npos) {
    return word;
  }
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

CommandOutput run_command(const std::vector<std::string>& argv) {
  TempFile out, err;
  CommandOutput result;
  result.status = commands::run_process(commands::ProcessSpec{argv, {}, out.path(), err.path()});
  result.out = out.read();
  result.err = err.read();
  while (!result.err.empty() && (result.err.back() == '\n' || result.err.back() == '\r')) result.err.pop_back();
  return result;
}

}  // namespace gpt::harness::slurm
