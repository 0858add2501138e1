#include "harness/launcher/process.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <thread>

#include "harness/launcher/safe_files.h"
#include "base/check.h"

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

namespace {

// Owns a file descriptor.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens and locks the run folder's lock file; the descriptor is close-on-exec, the child clears that flag
// on its own copy only (runs started in parallel must not inherit each other's locks).
int acquire_run_lock(const std::filesystem::path& path) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  const int fd = open_without_following(path, O_RDWR | O_CREAT);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[64] = {};
    const ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
    ::close(fd);
    std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string("unknown");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    throw RunFolderBusy("run folder '" + path.parent_path().string() +
                        "' is in use by another process (its lock file '" + path.string() +
                        "' is held; last started as process group " + who +
                        "); not starting a second trainer there. Stop the old one (kill -- -PGID) or wait for it");
  }
  return fd;
}

}  // namespace

Process Process::start(const LaunchSpec& spec) {
  GPT_CHECK(!spec.argv.empty() && !spec.argv[0].empty(), "launcher: empty command line");
  if (spec.log_path.has_parent_path()) std::filesystem::create_directories(spec.log_path.parent_path());
  Fd lock(spec.lock_path.empty() ? -1 : acquire_run_lock(spec.lock_path));
  if (spec.before_start) spec.before_start();

  // Open the log here, not in the child, so a bad path is reported as such rather than as a failed run.
  Fd log(open_without_following(spec.log_path, O_WRONLY | O_CREAT | O_APPEND | (spec.truncate_log ? O_TRUNC : 0)));
  if (!spec.stderr_path.empty() && spec.stderr_path.has_parent_path()) {
    std::filesystem::create_directories(spec.stderr_path.parent_path());
  }
  Fd err_log(
      spec.stderr_path.empty() ? -1 : ::open(spec.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  GPT_CHECK(spec.stderr_path.empty() || err_log.fd >= 0, "launcher: cannot open '", spec.stderr_path.string(),
            "' for the standard error of '", spec.argv[0], "': ", std::strerror(errno));
  int status_pipe[2];
  GPT_CHECK(::pipe2(status_pipe, O_CLOEXEC) == 0, "launcher: pipe: ", std::strerror(errno));
  Fd status_read(status_pipe[0]);
  Fd status_write(status_pipe[1]);

  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  CStrings argv(spec.argv);
  CStrings envp(merged_environment(spec.environment));
  const char* working_dir = spec.working_dir.empty() ? nullptr : spec.working_dir.c_str();
  const pid_t parent = ::getpid();
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  GPT_CHECK(pid >= 0, "launcher: cannot fork to start '", spec.argv[0], "': ", std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);  // own process group: a timeout or Ctrl-C stops the whole tree
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the harness died before the line above
    ::dup2(log.fd, STDOUT_FILENO);
    ::dup2(err_log.fd >= 0 ? err_log.fd : log.fd, STDERR_FILENO);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    if (lock.fd >= 0) ::fcntl(lock.fd, F_SETFD, 0);  // inherited by the trainer and what it starts
    // Default signal dispositions and an empty mask (our SIGINT handler must not be inherited as ignore).
    for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGHUP}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (working_dir != nullptr && ::chdir(working_dir) != 0) {
      const int error = errno;
      [[maybe_unused]] const ssize_t ignored = ::write(status_write.fd, &error, sizeof error);
      ::_exit(127);
    }
    ::execvpe(argv.pointers[0], argv.pointers.data(), envp.pointers.data());
    const int error = errno;
    [[maybe_unused]] const ssize_t ignored = ::write(status_write.fd, &error, sizeof error);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from here, so the group exists before we might signal it
  if (lock.fd >= 0) {
    const std::string holder = std::to_string(pid) + "\n";
    if (::ftruncate(lock.fd, 0) == 0) {
      [[maybe_unused]] const ssize_t ignored = ::pwrite(lock.fd, holder.data(), holder.size(), 0);
    }
  }
  ::close(status_write.fd);
  status_write.fd = -1;
  int child_error = 0;
  ssize_t n;
  do {
    n = ::read(status_read.fd, &child_error, sizeof child_error);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof child_error)) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    GPT_FAIL("launcher: cannot start '", spec.argv[0], "'",
             working_dir == nullptr ? "" : " in '" + spec.working_dir.string() + "'", ": ", std::strerror(child_error));
  }
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
