#pragma once
// Small helpers of the Slurm launcher: shell quoting for batch scripts and running the Slurm client tools.
#include <string>
#include <vector>

#include "harness/launcher/command.h"

namespace gpt::harness::slurm {

// `word` quoted for bash when it has characters the shell would interpret.
std::string shell_word(const std::string& word);
// `value` for an `#SBATCH --opt=VALUE` line: as is when plain, else in double quotes with `"` and `\` escaped
// (sbatch's own quoting). Throws gpt::Error for a control character (a newline would end the line).
std::string sbatch_word(const std::string& value);

struct CommandOutput {
  int status = 0;  // exit status, 128 + signal when killed
  std::string out, err;
};
// Runs argv (looked up on PATH) to completion through the launcher's run_command (own process group, stdout and
// stderr captured); throws gpt::Error naming the program when it cannot be started, and CommandTimedOut when it
// runs past `timeout_s` (its process group is killed).
CommandOutput run_command(const std::vector<std::string>& argv, double timeout_s = kQuickCommandTimeoutS);

}  // namespace gpt::harness::slurm
