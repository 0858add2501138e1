// The launcher's helper-command runner (harness/launcher/command.h): what compare, nightly, the record target and
// the Slurm launcher start. Output is captured or logged, a non-zero exit is returned, and a command past its
// limit is killed with its whole process group and named, with the limit, in the error.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "harness/commands/recipe_target.h"
#include "harness/launcher/command.h"
#include "harness/launcher/slurm_util.h"
#include "tests/harness/child_probe.h"
#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

using namespace std::chrono_literals;

// The message of the gpt::Error `run` throws ("" when it throws none).
template <typename Fn>
std::string error_of(Fn&& run) {
  try {
    run();
  } catch (const gpt::Error& e) {
    return e.what();
  }
  return "";
}

CommandSpec spec(std::vector<std::string> argv, double timeout_s = 30) {
  CommandSpec s;
  s.argv = std::move(argv);
  s.timeout_s = timeout_s;
  return s;
}

// A shell whose background child and itself ignore SIGTERM: only a SIGKILL of the whole group ends both.
// The child's pid goes to `pid_file`.
std::vector<std::string> stubborn_shell(const std::filesystem::path& pid_file) {
  return {"sh", "-c", "trap '' TERM; sleep 300 & echo $! > " + pid_file.string() + "; echo started; wait"};
}

TEST(Command, CapturesStdoutAndStderrApartAndReturnsTheExitStatus) {
  const CommandResult r = run_command(spec({"sh", "-c", "echo out; echo err >&2; exit 4"}));
  EXPECT_FALSE(r.succeeded());
  EXPECT_EQ(r.status(), 4);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST(Command, AKillingSignalIsStatus128PlusItsNumber) {
  const CommandResult r = run_command(spec({"sh", "-c", "kill -SEGV $$"}));
  EXPECT_FALSE(r.exit.exited);
  EXPECT_EQ(r.status(), 128 + 11);
}

TEST(Command, CaptureStdoutTrimsNewlinesAndRunsInTheWorkingDirectory) {
  EXPECT_EQ(capture_stdout({"sh", "-c", "echo hello; echo"}, 30), "hello");
  EXPECT_EQ(capture_stdout({"pwd"}, 30, "/"), "/");
}

TEST(Command, CaptureStdoutNamesAFailingCommandItsStatusAndItsComplaint) {
  const std::string message = error_of([] { capture_stdout({"sh", "-c", "echo bad revision >&2; exit 3"}, 30); });
  EXPECT_NE(message.find("'sh -c 'echo bad revision >&2; exit 3'' ended with exit code 3: bad revision"),
            std::string::npos)
      << message;
}

TEST(Command, AProgramThatCannotStartIsAnErrorNamingIt) {
  const std::string missing = error_of([] { run_command(spec({"/nonexistent/program"})); });
  EXPECT_NE(missing.find("cannot start '/nonexistent/program'"), std::string::npos) << missing;
  auto in_missing_dir = spec({"pwd"});
  in_missing_dir.working_dir = "/nonexistent/folder";
  const std::string bad_dir = error_of([&] { run_command(in_missing_dir); });
  EXPECT_NE(bad_dir.find("cannot start 'pwd' in '/nonexistent/folder'"), std::string::npos) << bad_dir;
}

TEST(Command, EveryCommandHasATimeLimit) {
  const std::string message = error_of([] { run_command(spec({"true"}, 0)); });
  EXPECT_NE(message.find("'true' has no time limit"), std::string::npos) << message;
}

TEST(Command, OutputGoesToTheLogWhenOneIsGiven) {
  TempDir dir;
  auto s = spec({"sh", "-c", "echo out; echo err >&2; exit 1"});
  s.log_path = dir / "logs" / "step.log";
  const CommandResult r = run_command(s);
  EXPECT_EQ(r.status(), 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(read_file(s.log_path), "out\nerr\n");
  s.argv = {"echo", "again"};
  run_command(s);  // appended
  EXPECT_EQ(read_file(s.log_path), "out\nerr\nagain\n");
  s.truncate_log = true;
  run_command(s);
  EXPECT_EQ(read_file(s.log_path), "again\n");
}

TEST(Command, AHungCommandAndItsProcessGroupAreKilledAtItsLimit) {
  TempDir dir;
  auto s = spec(stubborn_shell(dir / "child.pid"), 0.5);
  s.timeout_source = "--build-timeout";
  s.log_path = dir / "build.log";
  const auto started = std::chrono::steady_clock::now();
  std::string message;
  try {
    run_command(s);
    ADD_FAILURE() << "no timeout";
  } catch (const CommandTimedOut& e) {
    message = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(seconds, 15.0);  // the limit, then the group's SIGTERM grace
  EXPECT_NE(message.find("'sh -c 'trap '' TERM; sleep 300 &"), std::string::npos) << message;
  EXPECT_NE(message.find("did not finish within 0.5 s (--build-timeout): its process group was killed; its output "
                         "is in " +
                         s.log_path.string()),
            std::string::npos)
      << message;
  EXPECT_EQ(read_file(s.log_path), "started\n");
  const pid_t child = testing::read_pid(dir / "child.pid");
  ASSERT_GT(child, 0);
  EXPECT_TRUE(testing::ends_within(child, 5s)) << "the hung command's child " << child << " outlived it";
}

TEST(Command, ACapturedCommandPastItsLimitIsNamedWithABuiltInLimit) {
  TempDir dir;
  const std::string message = error_of([&] { capture_stdout(stubborn_shell(dir / "child.pid"), 0.2); });
  EXPECT_NE(message.find("did not finish within 0.2 s: its process group was killed"), std::string::npos) << message;
  EXPECT_EQ(message.find("output is in"), std::string::npos) << message;
  EXPECT_TRUE(testing::ends_within(testing::read_pid(dir / "child.pid"), 5s));
}

TEST(Command, SlurmToolsRunThroughTheSameLimit) {
  const auto r = slurm::run_command({"sh", "-c", "echo out; echo err >&2; exit 4"});
  EXPECT_EQ(r.status, 4);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err");
  TempDir dir;
  EXPECT_THROW(slurm::run_command(stubborn_shell(dir / "child.pid"), 0.2), CommandTimedOut);
  EXPECT_TRUE(testing::ends_within(testing::read_pid(dir / "child.pid"), 5s));
}

TEST(Command, AHungTrainerAskedForItsRecipeIsKilledAndNamed) {
  TempDir dir;
  const auto trainer = dir.write("train_gpt", "#!/bin/sh\nsleep 300\n");
  std::filesystem::permissions(trainer, std::filesystem::perms::owner_all);
  const std::string message = error_of([&] { read_recipe_target(trainer, "tiny", {}, 0.2); });
  EXPECT_NE(message.find("'" + trainer.string() + " --print-recipe --recipe tiny' did not finish within 0.2 s"),
            std::string::npos)
      << message;
}

TEST(Command, JoinCommandQuotesArgumentsWithSpaces) {
  EXPECT_EQ(join_command({"a", "b c"}), "a 'b c'");
  EXPECT_EQ(format_seconds(7200), "7200 s");
  EXPECT_EQ(format_seconds(0.5), "0.5 s");
}

}  // namespace
}  // namespace gpt::harness
