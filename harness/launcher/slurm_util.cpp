#include "harness/launcher/slurm_util.h"

namespace gpt::harness::slurm {

std::string shell_word(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                              "-_./=:,+@%") == std::string::npos) {
    return word;
  }
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

CommandOutput run_command(const std::vector<std::string>& argv, double timeout_s) {
  CommandSpec spec;
  spec.argv = argv;
  spec.timeout_s = timeout_s;
  const CommandResult ran = harness::run_command(spec);
  CommandOutput result;
  result.status = ran.status();
  result.out = ran.out;
  result.err = ran.err;
  while (!result.err.empty() && (result.err.back() == '\n' || result.err.back() == '\r')) result.err.pop_back();
  return result;
}

}  // namespace gpt::harness::slurm
