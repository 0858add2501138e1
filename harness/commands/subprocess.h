#pragma once
// Child processes for the compare and nightly commands: git, cmake, benchmark programs, trainers.
#include <filesystem>
#include <string>
#include <vector>

namespace gpt::harness::commands {

struct ProcessSpec {
  std::vector<std::string> argv;     // argv[0] is looked up on PATH
  std::filesystem::path cwd;         // empty: the current directory
  std::filesystem::path stdout_path;  // empty: inherit
  std::filesystem::path stderr_path;  // empty: inherit; equal to stdout_path: both into one file
};

// Runs the process to completion and returns its exit status (128 + signal when killed by one).
// Throws gpt::Error when it cannot be started.
int run_process(const ProcessSpec& spec);

// Runs argv in cwd and returns its stdout with trailing newlines removed; throws gpt::Error naming the
// command when it exits non-zero.
std::string capture_output(const std::vector<std::string>& argv, const std::filesystem::path& cwd = {});

// argv joined for logs and the sweep record (arguments with spaces are quoted).
std::string join_command(const std::vector<std::string>& argv);

}  // namespace gpt::harness::commands
