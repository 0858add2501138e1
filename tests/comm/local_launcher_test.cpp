// The local multi-process launcher (`train_gpt --gpus N`), driven with /bin/sh children: argv and environment of
// the ranks, exit codes, a dying rank and the grace period, SIGKILL for ranks that ignore SIGTERM, forwarded
// signals, bad input.
#include "trainer/comm/local_launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/check.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// A fresh directory for one test's files.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "launcher-test-XXXXXX").string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    path_ = pattern;
  }
  ~ScratchDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// N children of `/bin/sh -c script sh extra...`.
LocalLaunch shell_launch(int n, const std::string& script, std::vector<std::string> extra = {}) {
  LocalLaunch launch;
  launch.executable = "/bin/sh";
  launch.args = {"sh", "-c", script, "sh"};
  for (auto& e : extra) launch.args.push_back(std::move(e));
  launch.processes = n;
  launch.grace = milliseconds(100);
  launch.kill_after = milliseconds(300);
  return launch;
}

// Sets (or unsets) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(LocalLauncher, ArgsWithoutGpusFlag) {
  const char* argv[] = {"train_gpt", "--recipe", "tiny", "--gpus", "4", "--seed", "1", "--gpus=2", "--out", "o"};
  const auto args = args_without_gpus_flag(std::span<char* const>(const_cast<char**>(argv), std::size(argv)));
  EXPECT_EQ(args, (std::vector<std::string>{"train_gpt", "--recipe", "tiny", "--seed", "1", "--out", "o"}));
}

TEST(LocalLauncher, ChildEnvironmentReplacesLauncherVariables) {
  const std::vector<std::string> parent = {"PATH=/bin",          "RANK=7",  "CUDA_VISIBLE_DEVICES=3,5",
                                           "NCCL_NVLS_ENABLE=1", "HOME=/h", "SPEEDRUN_RENDEZVOUS_DIR=/old",
                                           "RANKING=x"};
  const auto env = child_environment(parent, 1, 2, "/rdzv");
  const std::vector<std::string> expected = {"PATH=/bin",          "HOME=/h",
                                             "RANKING=x",          "RANK=1",
                                             "LOCAL_RANK=1",       "WORLD_SIZE=2",
                                             "LOCAL_WORLD_SIZE=2", "CUDA_VISIBLE_DEVICES=5",
                                             "NCCL_NVLS_ENABLE=0", "SPEEDRUN_RENDEZVOUS_DIR=/rdzv"};
  EXPECT_EQ(env, expected);
  // Without a parent restriction rank i gets device i.
  const auto plain = child_environment({"PATH=/bin"}, 3, 4, "/r");
  EXPECT_NE(std::find(plain.begin(), plain.end(), "CUDA_VISIBLE_DEVICES=3"), plain.end());
}

TEST(LocalLauncher, TooFewVisibleDevicesIsAnError) {
  try {
    child_environment({"CUDA_VISIBLE_DEVICES=0,1"}, 0, 4, "/r");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA_VISIBLE_DEVICES='0,1' lists only 2"), std::string::npos) << e.what();
  }
}

TEST(LocalLauncher, ReturnsTheWorstExitCode) {
  const LaunchOutcome all_ok = run_local_processes(shell_launch(3, "exit 0"));
  EXPECT_EQ(all_ok.exit_code, 0);
  EXPECT_EQ(all_ok.child_codes, (std::vector<int>{0, 0, 0}));
  const LaunchOutcome mixed = run_local_processes(shell_launch(4, "exit $(( (RANK * 3) % 4 ))"));
  EXPECT_EQ(mixed.child_codes, (std::vector<int>{0, 3, 2, 1}));
  EXPECT_EQ(mixed.exit_code, 3);
  EXPECT_EQ(mixed.stopped_by_us, (std::vector<bool>{false, false, false, false}));
}

TEST(LocalLauncher, ChildrenSeeTheirRankDeviceAndRendezvous) {
  ScratchDir out;
  const ScopedEnv no_devices("CUDA_VISIBLE_DEVICES", nullptr);
  const ScopedEnv nvls("NCCL_NVLS_ENABLE", "1");
  const std::string script =
      "test -d \"$SPEEDRUN_RENDEZVOUS_DIR\" && d=yes || d=no; "
      "printf '%s|%s|%s|%s|%s|%s|%s|%s|%s' \"$RANK\" \"$WORLD_SIZE\" \"$LOCAL_RANK\" \"$LOCAL_WORLD_SIZE\" "
      "\"$CUDA_VISIBLE_DEVICES\" \"$NCCL_NVLS_ENABLE\" \"$d\" \"$1\" \"$2\" > \"$2/$RANK\"; "
      "printf '%s' \"$SPEEDRUN_RENDEZVOUS_DIR\" > \"$2/dir.$RANK\"";
  const LaunchOutcome outcome = run_local_processes(shell_launch(3, script, {"two words", out.path().string()}));
  ASSERT_EQ(outcome.exit_code, 0);
  for (int r = 0; r < 3; ++r) {
    const std::string rs = std::to_string(r);
    EXPECT_EQ(read_file(out.path() / rs), rs + "|3|" + rs + "|3|" + rs + "|0|yes|two words|" + out.path().string());
  }
  const std::string dir = read_file(out.path() / "dir.0");
  EXPECT_EQ(read_file(out.path() / "dir.1"), dir);
  EXPECT_EQ(read_file(out.path() / "dir.2"), dir);
  EXPECT_FALSE(fs::exists(dir)) << "the rendezvous directory outlived the launch";
}

TEST(LocalLauncher, DyingRankStopsTheOthersAfterTheGracePeriod) {
  // Rank 1 fails at once; the others would sleep 30 s, and exit 9 on SIGTERM.
  const std::string script =
      "if [ \"$RANK\" = 1 ]; then exit 5; fi; "
      "trap 'kill $p; exit 9' TERM; sleep 30 & p=$!; wait $p";
  std::ostringstream log;
  LocalLaunch launch = shell_launch(3, script);
  launch.log = &log;
  const auto start = std::chrono::steady_clock::now();
  const LaunchOutcome outcome = run_local_processes(launch);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(outcome.exit_code, 5);
  EXPECT_EQ(outcome.child_codes, (std::vector<int>{9, 5, 9}));
  EXPECT_EQ(outcome.stopped_by_us, (std::vector<bool>{true, false, true}));
  EXPECT_GE(took, milliseconds(100));  // the grace period was granted
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_NE(log.str().find("rank 1 ended with code 5"), std::string::npos) << log.str();
}

TEST(LocalLauncher, RanksIgnoringSigtermAreKilled) {
  const std::string script =
      "if [ \"$RANK\" = 0 ]; then exit 3; fi; "
      "trap '' TERM; sleep 2 & p=$!; wait $p; exit 0";
  const auto start = std::chrono::steady_clock::now();
  const LaunchOutcome outcome = run_local_processes(shell_launch(2, script));
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1800));
  EXPECT_EQ(outcome.child_codes, (std::vector<int>{3, 128 + SIGKILL}));
  EXPECT_EQ(outcome.exit_code, 3);
}

TEST(LocalLauncher, ForwardsSigtermToTheRanks) {
  ScratchDir out;
  const std::string script =
      "trap 'echo term > \"$1/$RANK\"; kill $p; exit 7' TERM; sleep 30 & p=$!; touch \"$1/ready.$RANK\"; wait $p";
  // SIGTERM stays blocked in this thread and in the launcher's (which inherits the mask), so the signal sent to the
  // process waits for the launcher's sigtimedwait instead of ending the test program.
  sigset_t term, previous;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &previous), 0);
  LaunchOutcome outcome;
  std::thread launcher([&] { outcome = run_local_processes(shell_launch(2, script, {out.path().string()})); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(fs::exists(out.path() / "ready.0") && fs::exists(out.path() / "ready.1")) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ::kill(::getpid(), SIGTERM);
  launcher.join();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  EXPECT_EQ(outcome.child_codes, (std::vector<int>{7, 7}));
  EXPECT_EQ(outcome.exit_code, 7);
  EXPECT_EQ(outcome.stopped_by_us, (std::vector<bool>{false, false}));
  EXPECT_EQ(read_file(out.path() / "0"), "term\n");
  EXPECT_EQ(read_file(out.path() / "1"), "term\n");
}

// With signal targets (the ranks mpirun started), a SIGTERM goes to them and not to the launcher's child (mpirun,
// which would kill the ranks before rank 0 writes the run's summary); the launcher waits for them and says so.
TEST(LocalLauncher, ForwardsSignalsToItsTargetsInsteadOfTheChild) {
  ScratchDir out;
  // Rank R (rank.sh DIR R) records its pid and, on SIGTERM, writes rR.term and ends.
  std::ofstream(out.path() / "rank.sh")
      << "trap 'echo term > \"$1/r$2.term\"; exit 1' TERM\necho $$ > \"$1/r$2.pid.partial\"\n"
      << "mv \"$1/r$2.pid.partial\" \"$1/r$2.pid\"\nwhile :; do sleep 0.02; done\n";
  const std::string script =
      "trap 'echo term > \"$1/child.term\"' TERM; sh \"$1/rank.sh\" \"$1\" 0 & "
      "sh \"$1/rank.sh\" \"$1\" 1 & wait; wait; wait";
  sigset_t term, previous;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &previous), 0);
  LocalLaunch launch = shell_launch(1, script, {out.path().string()});
  launch.kill_after = std::chrono::seconds(10);
  launch.child_name = "mpirun";
  std::ostringstream log;
  launch.log = &log;
  launch.signal_targets = [&] {
    std::vector<pid_t> pids;
    for (const char* name : {"r0.pid", "r1.pid"}) {
      const std::string text = read_file(out.path() / name);
      if (!text.empty() && std::stoi(text) > 1) pids.push_back(std::stoi(text));
    }
    return pids;
  };
  LaunchOutcome outcome;
  std::thread launcher([&] { outcome = run_local_processes(launch); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(fs::exists(out.path() / "r0.pid") && fs::exists(out.path() / "r1.pid")) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ::kill(::getpid(), SIGTERM);
  launcher.join();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  EXPECT_EQ(outcome.interrupted_by, SIGTERM);
  EXPECT_EQ(outcome.child_codes, (std::vector<int>{0})) << log.str();
  EXPECT_EQ(read_file(out.path() / "r0.term"), "term\n");
  EXPECT_EQ(read_file(out.path() / "r1.term"), "term\n");
  EXPECT_FALSE(fs::exists(out.path() / "child.term")) << "the signal reached the launcher's child";
  EXPECT_NE(log.str().find("launcher: received SIGTERM; forwarding it to 2 rank(s) and waiting for them to end"),
            std::string::npos)
      << log.str();
}

TEST(LocalLauncher, BadInput) {
  LocalLaunch missing = shell_launch(2, "exit 0");
  missing.executable = "/nonexistent/train_gpt";
  try {
    run_local_processes(missing);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/train_gpt"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_local_processes(shell_launch(0, "exit 0")), Error);
  {
    const ScopedEnv devices("CUDA_VISIBLE_DEVICES", "0");
    EXPECT_THROW(run_local_processes(shell_launch(2, "exit 0")), Error);
  }
  const ScopedEnv rank("RANK", "0");
  const char* argv[] = {"train_gpt", "--gpus", "2"};
  try {
    launch_local_ranks(2, 3, const_cast<char**>(argv));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already a launched rank"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt

namespace gpt {
namespace {

TEST(MpiLaunch, CommandRunsTheBinaryWithoutRanksUnderMpirun) {
  const char* argv[] = {"train_gpt", "--ranks", "4", "--recipe", "tiny", "--ranks=4", "--seed", "1"};
  const auto args = args_without_flag(std::span<char* const>(const_cast<char**>(argv), std::size(argv)), "--ranks");
  EXPECT_EQ(args, (std::vector<std::string>{"train_gpt", "--recipe", "tiny", "--seed", "1"}));
  EXPECT_EQ(mpirun_command("/usr/bin/mpirun", 4, "/b/train_gpt", args, true),
            (std::vector<std::string>{"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                                      "-np", "4", "/b/train_gpt", "--recipe", "tiny", "--seed", "1"}));
  EXPECT_EQ(mpirun_command("mpirun", 2, "t", {"t"}, false),
            (std::vector<std::string>{"mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2", "t"}));
}

TEST(MpiLaunch, RunStatusKeepsTheTrainersCodesAndMapsSignalsToFailure) {
  for (int code : {0, 1, 2, 3}) EXPECT_EQ(run_status_from_mpirun(code), code);
  EXPECT_EQ(run_status_from_mpirun(137), 1);  // a rank killed by SIGKILL
  EXPECT_EQ(run_status_from_mpirun(143), 1);
  EXPECT_EQ(run_status_from_mpirun(255), 1);
}

}  // namespace
}  // namespace gpt
