// posix_spawn based child processes: see subprocess.h.
#include "harness/commands/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/check.h"

extern char** environ;

namespace gpt::harness::commands {
namespace {

// posix_spawn_file_actions_t with RAII so every exit path releases it.
class FileActions {
 public:
  FileActions() { posix_spawn_file_actions_init(&actions_); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

}  // namespace

std::string join_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += a.find(' ') == std::string::npos ? a : "'" + a + "'";
  }
  return out;
}

int run_process(const ProcessSpec& spec) {
  GPT_CHECK(!spec.argv.empty(), "run_process: empty command");
  FileActions actions;
  if (!spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(actions.get(), spec.cwd.c_str());
  constexpr int kFlags = O_WRONLY | O_CREAT | O_TRUNC;
  if (!spec.stdout_path.empty()) {
    posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, spec.stdout_path.c_str(), kFlags, 0644);
  }
  if (!spec.stderr_path.empty()) {
    if (spec.stderr_path == spec.stdout_path) {
      posix_spawn_file_actions_adddup2(actions.get(), STDOUT_FILENO, STDERR_FILENO);
    } else {
      posix_spawn_file_actions_addopen(actions.get(), STDERR_FILENO, spec.stderr_path.c_str(), kFlags, 0644);
    }
  }
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], actions.get(), nullptr, argv.data(), environ);
  GPT_CHECK(rc == 0, "cannot start '", join_command(spec.argv), "': ", std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    GPT_CHECK(errno == EINTR, "waitpid for '", join_command(spec.argv), "': ", std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string capture_output(const std::vector<std::string>& argv, const std::filesystem::path& cwd) {
  char name[] = "/tmp/harness-capture-XXXXXX";
  const int fd = mkstemp(name);
  GPT_CHECK(fd >= 0, "capture_output: cannot create a temporary file: ", std::strerror(errno));
  close(fd);
  const std::filesystem::path path(name);
  const int rc = run_process(ProcessSpec{argv, cwd, path, {}});
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  GPT_CHECK(rc == 0, "'", join_command(argv), "' exited with status ", rc);
  std::string out = text.str();
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace gpt::harness::commands
