#pragma once
// Watching the processes a test's children leave behind: whether a pid is still alive, and the pid a script
// wrote to a file.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

namespace gpt::harness::testing {

// True while `pid` names a live (not zombie) process.
inline bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

// The pid a script wrote to `file` (waiting up to 5 s for it); 0 if none came.
inline pid_t read_pid(const std::filesystem::path& file) {
  long pid = 0;
  for (int i = 0; i < 500 && pid <= 0; ++i) {
    std::ifstream in(file);
    if (!(in >> pid)) {
      pid = 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return static_cast<pid_t>(pid);
}

// Waits up to `limit` for `pid` to end; true when it did (a killed process's orphans are reaped by init).
inline bool ends_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (alive(pid)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace gpt::harness::testing
