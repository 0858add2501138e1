#include "harness/launcher/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <thread>

#include "kernels/check.h"

extern char** environ;

namespace gpt::harness {

namespace {

ExitInfo decode(int status, double wall) {
  ExitInfo info;
  info.wall_time_s = wall;
  if (WIFEXITED(status)) {
    info.exited = true;
    info.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    info.signal = WTERMSIG(status);
  }
  return info;
}

// posix_spawn needs C arrays; this owns the strings behind them.
struct CStrings {
  std::vector<std::string> storage;
  std::vector<char*> pointers;
  explicit CStrings(std::vector<std::string> strings) : storage(std::move(strings)) {
    for (auto& s : storage) pointers.push_back(s.data());
    pointers.push_back(nullptr);
  }
};

std::vector<std::string> merged_environment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : extra) vars[key] = value;
  std::vector<std::string> out;
  for (const auto& [key, value] : vars) out.push_back(key + "=" + value);
  return out;
}

}  // namespace

std::string ExitInfo::describe() const {
  if (exited) return "exit code " + std::to_string(exit_code);
  const char* name = strsignal(signal);
  return "signal " + std::to_string(signal) + " (" + (name ? name : "unknown") + ")";
}

Process Process::start(const LaunchSpec& spec) {
  GPT_CHECK(!spec.argv.empty() && !spec.argv[0].empty(), "launcher: empty command line");
  if (spec.log_path.has_parent_path()) std::filesystem::create_directories(spec.log_path.parent_path());

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  struct Cleanup {
    posix_spawn_file_actions_t* a;
    posix_spawnattr_t* t;
    ~Cleanup() {
      posix_spawn_file_actions_destroy(a);
      posix_spawnattr_destroy(t);
    }
  } cleanup{&actions, &attr};

  // Open the log here, not in the child, so a bad path is reported as such rather than as a failed run.
  const int log_fd = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  GPT_CHECK(log_fd >= 0, "launcher: cannot open log file '", spec.log_path.string(), "': ", std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } log_closer{log_fd};
  posix_spawn_file_actions_adddup2(&actions, log_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, log_fd, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);

  // Own process group; default signal dispositions (our SIGINT handler must not be inherited as ignore).
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  sigset_t no_mask;
  sigemptyset(&no_mask);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &no_mask);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  CStrings argv(spec.argv);
  CStrings envp(merged_environment(spec.environment));
  pid_t pid = -1;
  const auto started = std::chrono::steady_clock::now();
  const int rc = posix_spawnp(&pid, spec.argv[0].c_str(), &actions, &attr, argv.pointers.data(), envp.pointers.data());
  GPT_CHECK(rc == 0, "launcher: cannot start '", spec.argv[0], "': ", std::strerror(rc));
  return Process(pid, started);
}

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), started_(other.started_), exit_(std::move(other.exit_)) {}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    if (running()) terminate(std::chrono::milliseconds(0));
    pid_ = std::exchange(other.pid_, -1);
    started_ = other.started_;
    exit_ = std::move(other.exit_);
  }
  return *this;
}

Process::~Process() {
  if (running()) terminate(std::chrono::milliseconds(0));
}

double Process::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

std::optional<ExitInfo> Process::poll() {
  if (exit_ || pid_ <= 0) return exit_;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) exit_ = decode(status, elapsed_s());
  return exit_;
}

ExitInfo Process::wait() {
  while (!exit_) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, 0);
    if (r == pid_) {
      exit_ = decode(status, elapsed_s());
    } else if (r < 0 && errno != EINTR) {
      GPT_FAIL("launcher: waitpid(", pid_, ") failed: ", std::strerror(errno));
    }
  }
  return *exit_;
}

void Process::kill_group(int sig) const {
  if (pid_ > 0) ::kill(-pid_, sig);
}

ExitInfo Process::terminate(std::chrono::milliseconds grace) {
  if (exit_) {
    kill_group(SIGKILL);  // the leader is gone; stragglers in its group are not wanted either
    return *exit_;
  }
  kill_group(SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (poll()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill_group(SIGKILL);
  return wait();
}

}  // namespace gpt::harness
