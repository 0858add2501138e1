#pragma once
// Child processes for training runs: started in a process group of their own (so a timeout or Ctrl-C can
// stop the whole tree a launcher script forks), stdout and stderr appended to one log file, extra
// environment variables on top of ours. The Process object owns the child: destroying it while the child
// runs kills the group and reaps it. The child also gets a parent-death signal (SIGKILL), so a harness
// killed with SIGKILL takes its trainers with it.
//
// A run folder is guarded by a lock file: the launcher takes an exclusive flock on it and hands the open
// file to the child, so the lock is held for as long as the child or anything it started lives. A second
// launch into the same folder is refused with RunFolderBusy instead of running beside the first.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"

namespace gpt::harness {

struct LaunchSpec {
  LaunchSpec(std::vector<std::string> argv_, std::filesystem::path log_path_,
             std::vector<std::pair<std::string, std::string>> environment_ = {}, std::filesystem::path lock_path_ = {},
             bool truncate_log_ = false)
      : argv(std::move(argv_)),
        log_path(std::move(log_path_)),
        environment(std::move(environment_)),
        lock_path(std::move(lock_path_)),
        truncate_log(truncate_log_) {}
  std::vector<std::string> argv;  // argv[0] is looked up in PATH unless it contains a '/'
  std::filesystem::path log_path;
  std::vector<std::pair<std::string, std::string>> environment;  // added or overridden variables
  std::filesystem::path lock_path;                               // empty: no lock
  bool truncate_log = false;          // start the log afresh (after the lock is taken: never under a live run)
  std::filesystem::path working_dir;  // empty: ours
  std::filesystem::path stderr_path;  // empty: stderr goes to the log with stdout; else its own file (truncated)
  // Runs once the lock is held and before the log is opened: what must never happen under a live run of the same
  // folder (emptying it for a fresh attempt). An exception it throws ends the start.
  std::function<void()> before_start;
};

// Another process (a trainer of an earlier, killed harness, or a second harness) holds the run folder's lock.
class RunFolderBusy : public gpt::Error {
 public:
  using gpt::Error::Error;
};

struct ExitInfo {
  bool exited = false;  // normal exit (exit_code valid) vs. killed by a signal (signal valid)
  int exit_code = 0;
  int signal = 0;
  double wall_time_s = 0;
  std::string describe() const;  // "exit code 1", "signal 11 (Segmentation fault)"
};

class Process {
 public:
  // Throws gpt::Error (naming the program and the reason) if the log cannot be opened or the program
  // cannot be started.
  static Process start(const LaunchSpec& spec);

  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exit_; }
  double elapsed_s() const;

  std::optional<ExitInfo> poll();  // non-blocking; the exit info once the child has ended
  ExitInfo wait();                 // blocking
  // Sends SIGTERM to the group, waits up to `grace` for the child to end, then SIGKILLs the group.
  ExitInfo terminate(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

 private:
  Process(pid_t pid, std::chrono::steady_clock::time_point started) : pid_(pid), started_(started) {}
  void kill_group(int sig) const;
  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point started_;
  std::optional<ExitInfo> exit_;
};

}  // namespace gpt::harness
