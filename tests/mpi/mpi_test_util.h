#pragma once
// Helpers of the multi-rank tests: they start their ranks themselves (mpirun on localhost, or train_gpt --ranks N)
// and skip with the reason when mpirun is missing. Open MPI's plug-ins are unloaded before the leak checker runs,
// so their allocations show up as leaks of unknown modules: the ranks run with detect_leaks=0 (every other
// AddressSanitizer check stays on).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace gpt::test {

inline std::optional<std::filesystem::path> mpirun_path() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path == nullptr ? "" : path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const auto candidate = std::filesystem::path(dir) / "mpirun";
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

#define SKIP_WITHOUT_MPIRUN()                                                    \
  if (!::gpt::test::mpirun_path())                                               \
  GTEST_SKIP() << "mpirun is not on PATH (Debian: openmpi-bin): the multi-rank " \
                  "tests start their ranks with it"

// `mpirun -np N` on this machine, as a shell prefix.
inline std::string mpirun_prefix(int ranks) {
  return "mpirun --allow-run-as-root --oversubscribe --bind-to none -np " + std::to_string(ranks) + " ";
}

struct Shell {
  int exit_code = -1;
  double seconds = 0;
  std::string output;  // stdout and stderr together
};

// Runs `command` through the shell with the ranks' environment, stopped after `limit_s` (exit 124 then).
inline Shell run_shell(const std::string& command, const std::filesystem::path& scratch, int limit_s = 240) {
  const auto out = scratch / "shell-output.txt";
  const std::string line = "ASAN_OPTIONS=detect_leaks=0 timeout -k 5 " + std::to_string(limit_s) + " " + command +
                           " > " + out.string() + " 2>&1";
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(line.c_str());
  Shell s;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  s.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out);
  s.output.assign(std::istreambuf_iterator<char>(in), {});
  return s;
}

}  // namespace gpt::test
