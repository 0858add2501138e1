#include "trainer/comm/local_launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string_view>

#include "base/check.h"
#include "trainer/comm/mpi_comm.h"
#include "trainer/comm/rank_status.h"
#include "trainer/comm/rendezvous.h"

extern char** environ;

namespace gpt {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    out.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// A directory made with mkdtemp and removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::filesystem::path& parent, const std::string& prefix = "speedrun-rendezvous") {
    std::string pattern =
        ((parent.empty() ? std::filesystem::temp_directory_path() : parent) / (prefix + "-XXXXXX")).string();
    GPT_CHECK(::mkdtemp(pattern.data()) != nullptr, "launcher: cannot create a directory from ", pattern, ": ",
              std::strerror(errno));
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Blocks SIGINT, SIGTERM and SIGCHLD in this thread (they are taken with sigtimedwait) and restores the mask.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    for (int s : {SIGINT, SIGTERM, SIGCHLD}) sigaddset(&set_, s);
    GPT_CHECK(pthread_sigmask(SIG_BLOCK, &set_, &previous_) == 0, "launcher: pthread_sigmask failed");
  }
  ~BlockedSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;
  const sigset_t& set() const { return set_; }
  const sigset_t& previous() const { return previous_; }

 private:
  sigset_t set_{};
  sigset_t previous_{};
};

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

struct Child {
  pid_t pid = -1;
  std::optional<int> code;
  bool stopped_by_us = false;
};

// The children of one launch. Whatever happens (an exception included) none outlives the object: the
// destructor kills and reaps those still running.
class Children {
 public:
  ~Children() {
    for (Child& c : children_) {
      if (c.code) continue;
      ::kill(c.pid, SIGKILL);
      int status = 0;
      ::waitpid(c.pid, &status, 0);
    }
  }
  std::vector<Child>& all() { return children_; }

  // fork + exec with everything the child needs prepared beforehand (only async-signal-safe calls after fork).
  void spawn(const std::filesystem::path& exe, const std::vector<std::string>& args,
             const std::vector<std::string>& env, const sigset_t& child_mask) {
    std::vector<char*> argv, envp;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    GPT_CHECK(pid >= 0, "launcher: fork failed: ", std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(128 + SIGTERM);  // the parent died before prctl took effect
      ::sigprocmask(SIG_SETMASK, &child_mask, nullptr);
      ::execve(exe.c_str(), argv.data(), envp.data());
      ::_exit(127);
    }
    children_.push_back({pid, std::nullopt, false});
  }

 private:
  std::vector<Child> children_;
};

// A received SIGINT/SIGTERM: to the launch's own targets when it has any, else to the running children.
void forward_signal(const LocalLaunch& launch, std::vector<Child>& children, int sig) {
  const std::vector<pid_t> targets = launch.signal_targets ? launch.signal_targets() : std::vector<pid_t>{};
  if (launch.log) {
    *launch.log << "launcher: received " << signal_name(sig) << "; forwarding it to "
                << (targets.empty() ? (launch.child_name.empty() ? "the ranks" : launch.child_name)
                                    : std::to_string(targets.size()) + " rank(s)")
                << " and waiting for them to end\n";
  }
  if (targets.empty()) {
    for (Child& c : children) {
      if (!c.code) ::kill(c.pid, sig);
    }
  }
  for (pid_t pid : targets) {
    if (pid > 1) ::kill(pid, sig);  // never 0 or -1: those would signal a process group or every process
  }
}

void signal_running(std::vector<Child>& children, int sig, bool mark_stopped) {
  for (Child& c : children) {
    if (c.code) continue;
    ::kill(c.pid, sig);
    if (mark_stopped) c.stopped_by_us = true;
  }
}

}  // namespace

std::vector<std::string> args_without_flag(std::span<char* const> argv, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string_view a = argv[i];
    if (i > 0 && a == flag) {
      ++i;  // and its value
      continue;
    }
    if (i > 0 && a.starts_with(flag + "=")) continue;
    out.emplace_back(a);
  }
  return out;
}

std::vector<std::string> args_without_gpus_flag(std::span<char* const> argv) {
  return args_without_flag(argv, "--gpus");
}

int run_status_from_mpirun(int mpirun_code) { return mpirun_code >= 0 && mpirun_code <= 3 ? mpirun_code : 1; }

std::vector<std::string> mpirun_command(const std::string& mpirun, int ranks, const std::filesystem::path& executable,
                                        const std::vector<std::string>& args, bool as_root) {
  std::vector<std::string> command = {mpirun};
  if (as_root) command.emplace_back("--allow-run-as-root");
  for (const char* a : {"--oversubscribe", "--bind-to", "none", "-np"}) command.emplace_back(a);
  command.push_back(std::to_string(ranks));
  command.push_back(executable.string());
  command.insert(command.end(), args.begin() + 1, args.end());  // args[0] is the program name
  return command;
}

namespace {

std::optional<std::filesystem::path> find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string_view rest = path == nullptr ? "" : path;
  while (!rest.empty()) {
    const size_t colon = std::min(rest.find(':'), rest.size());
    const std::filesystem::path candidate = std::filesystem::path(rest.substr(0, colon)) / name;
    if (!rest.substr(0, colon).empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    rest = colon < rest.size() ? rest.substr(colon + 1) : std::string_view();
  }
  return std::nullopt;
}

}  // namespace

int launch_mpi_ranks(int ranks, int argc, char** argv) {
  for (const char* var : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"}) {
    GPT_CHECK(std::getenv(var) == nullptr, "--ranks ", ranks, ": ", var,
              " is set, so this process is already a launched rank; use either --ranks or an external launcher");
  }
  std::filesystem::path mpirun;
  if (const char* chosen = std::getenv("SPEEDRUN_MPIRUN"); chosen != nullptr && *chosen != '\0') {
    mpirun = chosen;
  } else {
    const auto found = find_on_path("mpirun");
    GPT_CHECK(found.has_value(), "--ranks ", ranks,
              ": mpirun is not on PATH (install Open MPI: apt-get install openmpi-bin, as scripts/setup does)");
    mpirun = *found;
  }
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) self = argv[0];
  const std::vector<std::string> args =
      args_without_flag(std::span<char* const>(argv, static_cast<size_t>(argc)), "--ranks");
  const TempDir statuses({}, "speedrun-rank-status");
  LocalLaunch launch;
  launch.executable = mpirun;
  launch.args = mpirun_command(mpirun.string(), ranks, self, args, ::geteuid() == 0);
  launch.processes = 1;
  launch.log = &std::cerr;
  launch.plain_environment = true;
  launch.extra_environment = {std::string(kRankStatusDirVar) + "=" + statuses.path().string()};
  launch.child_name = "mpirun";
  launch.signal_targets = [&] { return recorded_rank_pids(statuses.path(), ranks); };
  // Stopped ranks write the summary (rank 0) or wait up to kAbortGrace for rank 0 to end the job.
  launch.kill_after = kAbortGrace + std::chrono::seconds(20);
  const LaunchOutcome outcome = run_local_processes(launch);
  const int code = outcome.exit_code;
  const std::string ends = describe_rank_ends(read_rank_ends(statuses.path(), ranks), code);
  if (outcome.interrupted_by != 0) {
    std::cerr << "launcher: interrupted by " << signal_name(outcome.interrupted_by)
              << ": the ranks were stopped and have ended" << (ends.empty() ? "" : " (" + ends + ")") << std::endl;
    return 128 + outcome.interrupted_by;
  }
  if (code != 0 && !ends.empty()) std::cerr << "launcher: the run failed: " << ends << std::endl;
  return run_status_from_mpirun(code);
}

std::vector<std::string> child_environment(const std::vector<std::string>& parent, int rank, int world_size,
                                           const std::filesystem::path& rendezvous_dir) {
  static constexpr std::string_view kOwned[] = {
      "RANK",           "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "CUDA_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE",
      kRendezvousDirVar};
  std::vector<std::string> env;
  std::optional<std::string> parent_devices;
  for (const std::string& entry : parent) {
    const std::string_view name = std::string_view(entry).substr(0, entry.find('='));
    if (name == "CUDA_VISIBLE_DEVICES") parent_devices = entry.substr(name.size() + 1);
    if (std::find(std::begin(kOwned), std::end(kOwned), name) == std::end(kOwned)) env.push_back(entry);
  }
  std::string device = std::to_string(rank);
  if (parent_devices && !parent_devices->empty()) {
    const std::vector<std::string> listed = split_commas(*parent_devices);
    GPT_CHECK(static_cast<int>(listed.size()) >= world_size, "--gpus ", world_size, ": CUDA_VISIBLE_DEVICES='",
              *parent_devices, "' lists only ", listed.size(), " device(s)");
    device = listed[static_cast<size_t>(rank)];
  }
  const std::string r = std::to_string(rank), w = std::to_string(world_size);
  for (std::string var :
       {"RANK=" + r, "LOCAL_RANK=" + r, "WORLD_SIZE=" + w, "LOCAL_WORLD_SIZE=" + w, "CUDA_VISIBLE_DEVICES=" + device,
        std::string("NCCL_NVLS_ENABLE=0"), std::string(kRendezvousDirVar) + "=" + rendezvous_dir.string()}) {
    env.push_back(std::move(var));
  }
  return env;
}

LaunchOutcome run_local_processes(const LocalLaunch& launch) {
  GPT_CHECK(launch.processes >= 1, "launcher: the number of processes must be >= 1, got ", launch.processes);
  GPT_CHECK(!launch.args.empty(), "launcher: empty argv");
  GPT_CHECK(::access(launch.executable.c_str(), X_OK) == 0, "launcher: cannot execute ", launch.executable.string(),
            ": ", std::strerror(errno));
  std::vector<std::string> parent_env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) parent_env.emplace_back(*e);
  std::vector<std::vector<std::string>> envs;
  const TempDir rendezvous(launch.rendezvous_parent);
  for (int r = 0; r < launch.processes; ++r) {
    envs.push_back(launch.plain_environment ? parent_env
                                            : child_environment(parent_env, r, launch.processes, rendezvous.path()));
    envs.back().insert(envs.back().end(), launch.extra_environment.begin(), launch.extra_environment.end());
  }

  const BlockedSignals signals;
  // Children start with the caller's mask minus the launcher's signals, so that forwarded ones reach them.
  sigset_t child_mask = signals.previous();
  for (int s : {SIGINT, SIGTERM, SIGCHLD}) sigdelset(&child_mask, s);
  Children children;
  for (int r = 0; r < launch.processes; ++r) {
    children.spawn(launch.executable, launch.args, envs[static_cast<size_t>(r)], child_mask);
  }
  std::vector<Child>& all = children.all();

  std::optional<Clock::time_point> failed_at, terminated_at;
  bool killed = false;
  int interrupted_by = 0;
  for (;;) {
    for (size_t r = 0; r < all.size(); ++r) {
      Child& c = all[r];
      int status = 0;
      if (c.code) continue;
      const pid_t reaped = ::waitpid(c.pid, &status, WNOHANG);
      if (reaped == c.pid) {
        c.code = decode_status(status);
      } else if (reaped < 0 && errno == ECHILD) {
        c.code = 1;  // reaped elsewhere (SIGCHLD ignored by the program): the status is lost, count it as failed
      } else {
        continue;
      }
      if (*c.code != 0 && !c.stopped_by_us && !failed_at) {
        failed_at = Clock::now();
        if (launch.log) {
          *launch.log << "launcher: " << (launch.child_name.empty() ? "rank " + std::to_string(r) : launch.child_name)
                      << " ended with code " << *c.code;
          if (launch.processes > 1) {
            *launch.log << "; stopping the other ranks in " << launch.grace.count() << " ms unless they end first";
          }
          *launch.log << "\n";
        }
      }
    }
    if (std::all_of(all.begin(), all.end(), [](const Child& c) { return c.code.has_value(); })) break;
    const auto now = Clock::now();
    if (failed_at && !terminated_at && now - *failed_at >= launch.grace) {
      signal_running(all, SIGTERM, true);
      terminated_at = now;
    }
    if (terminated_at && !killed && now - *terminated_at >= launch.kill_after) {
      signal_running(all, SIGKILL, true);
      killed = true;
    }
    const timespec tick{0, 20'000'000};
    siginfo_t info{};
    const int sig = ::sigtimedwait(&signals.set(), &info, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      interrupted_by = sig;
      forward_signal(launch, all, sig);
      if (!terminated_at) terminated_at = Clock::now();  // SIGKILL after kill_after if they ignore it
    }
  }

  LaunchOutcome outcome;
  outcome.interrupted_by = interrupted_by;
  for (const Child& c : all) {
    outcome.child_codes.push_back(*c.code);
    outcome.stopped_by_us.push_back(c.stopped_by_us);
    if (!c.stopped_by_us) outcome.exit_code = std::max(outcome.exit_code, *c.code);
  }
  return outcome;
}

int launch_local_ranks(int gpus, int argc, char** argv) {
  GPT_CHECK(gpus >= 1, "--gpus ", gpus, ": expected a positive number of local processes");
  for (const char* var : {"RANK", "WORLD_SIZE"}) {
    GPT_CHECK(std::getenv(var) == nullptr, "--gpus ", gpus, ": ", var,
              " is set, so this process is already a launched rank; use either --gpus or an external launcher");
  }
  LocalLaunch launch;
  std::error_code ec;
  launch.executable = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) launch.executable = argv[0];
  launch.args = args_without_gpus_flag(std::span<char* const>(argv, static_cast<size_t>(argc)));
  launch.processes = gpus;
  launch.log = &std::cerr;
  return run_local_processes(launch).exit_code;
}

}  // namespace gpt
