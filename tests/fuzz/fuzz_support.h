#pragma once
// Shared pieces of the libFuzzer targets: a scratch file for readers that take a path, and the rule that a
// parser may reject input only with gpt::Error (any other exception, a crash or a sanitizer report is a finding).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "base/check.h"

namespace gpt::fuzz {

// A file in /dev/shm (memory, when present) or $TMPDIR, unique per process, rewritten for every input.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& suffix) {
    const char* tmp = std::getenv("TMPDIR");
    const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : (tmp ? tmp : "/tmp");
    path_ = dir / ("speedrun_fuzz_" + std::to_string(::getpid()) + suffix);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ~ScratchFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::filesystem::path& write(std::string_view bytes) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::fprintf(stderr, "fuzz: cannot write %s\n", path_.c_str());
      std::abort();
    }
    return path_;
  }

 private:
  std::filesystem::path path_;
};

// Runs `parse`; a gpt::Error is an accepted rejection of bad input, anything else escapes (libFuzzer reports it).
template <typename Fn>
void expect_parsed_or_rejected(Fn&& parse) {
  try {
    parse();
  } catch (const gpt::Error&) {
  }
}

// A property that must hold: prints the message and aborts (a finding) when it does not.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace gpt::fuzz
