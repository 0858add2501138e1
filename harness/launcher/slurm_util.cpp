#include "harness/launcher/slurm_util.h"

#include "base/check.h"

namespace gpt::harness::slurm {

namespace {

bool is_plain_word(const std::string& word) {
  return !word.empty() && word.find_first_not_of(
                              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                              "-_./=:,+@%") == std::string::npos;
}

}  // namespace

std::string sbatch_word(const std::string& value) {
  for (const char c : value) {
    GPT_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f, "Slurm batch script: '", shell_word(value),
              "' holds a control character, which an #SBATCH line cannot carry; use a path without one");
  }
  if (is_plain_word(value)) return value;
  std::string out = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string shell_word(const std::string& word) {
  if (is_plain_word(word)) return word;
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
