#pragma once
// Small helpers of the Slurm launcher: shell quoting for batch scripts and running the Slurm client tools.
#include <string>
#include <vector>

namespace gpt::harness::slurm {

// `word` quoted for bash when it has characters the shell would interpret.
std::string shell_word(const std::string& word);

struct CommandOutput {
  int status = 0;  // exit status, 128 + signal when killed
  std::string out, err;
};
// Runs argv (looked up on PATH) to completion with stdout and stderr captured; throws gpt::Error naming the
// program when it cannot be started.
CommandOutput run_command(const std::vector<std::string>& argv);

}  // namespace gpt::harness::slurm
