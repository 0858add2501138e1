// SIGINT/SIGTERM to a one-rank run: it stops before its next step, logs the interruption and writes its summary
// (it died without either), and train_gpt exits 128 + the signal as before.
#include "trainer/run/stop_request.h"

#include <signal.h>

#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "run_test_util.h"

namespace gpt {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(StopRequest, SigtermStopsAOneRankRunWithALogLineAndASummary) {
  test::RunScratch scratch;
  RunHooks hooks;
  hooks.after_reset = [](const std::vector<NamedTensor>&) { ::raise(SIGTERM); };  // the timed loop's first step
  const RunResult r = test::standin_run(test::short_run(scratch, "stopped")).run(hooks);
  EXPECT_EQ(r.status, RunStatus::failed);
  EXPECT_EQ(r.error, "interrupted by SIGTERM (signal 15)");
  EXPECT_EQ(r.interrupted_by, SIGTERM);
  EXPECT_EQ(r.steps, 0);
  const nlohmann::json j = nlohmann::json::parse(read_text(scratch.out() / "stopped.json"));
  EXPECT_EQ(j.at("status"), "failed");
  EXPECT_EQ(j.at("error"), "interrupted by SIGTERM (signal 15)");
  EXPECT_NE(read_text(scratch.out() / "stopped.txt").find("failed: interrupted by SIGTERM (signal 15)"),
            std::string::npos);
  // The handlers are the previous ones again after the run.
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(StopRequest, TrainGptExitsWithTheSignalsStatusAfterWritingTheSummary) {
  test::RunScratch scratch;
  const auto log = scratch.out() / "cli.txt";
  const auto script = scratch.root() / "stop.sh";
  std::ofstream(script) << SPEEDRUN_BINARY_DIR << "/bin/standin_train_gpt " << test::short_run_args(scratch, "cli")
                        << " --set schedule.num_scheduled=100000 --set schedule.warmup=false &\n"
                        << "run=$!\nfor i in $(seq 1200); do grep -q '^step:2/' " << log.string()
                        << " 2>/dev/null && break; sleep 0.1; done\nkill -TERM $run\nwait $run\nexit $?\n";
  const int status = std::system(("timeout 300 bash " + script.string() + " > /dev/null 2>&1").c_str());
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 128 + SIGTERM);
  const nlohmann::json j = nlohmann::json::parse(read_text(scratch.out() / "cli.json"));
  EXPECT_EQ(j.at("status"), "failed");
  EXPECT_EQ(j.at("error"), "interrupted by SIGTERM (signal 15)");
  EXPECT_NE(read_text(log).find("failed: interrupted by SIGTERM"), std::string::npos);
}

// The run's stop requests: a one-rank run's guard turns SIGTERM into an error before the next step and reports
// the signal; a rank of a multi-rank run installs nothing (its communicator handles signals), so a request left
// from an earlier one-rank run in the same process neither stops it nor is reported as its interruption.
TEST(StopRequest, RunStopRequestsGuardOneRankRunsOnly) {
  {
    const RunStopRequests one_rank(1);
    EXPECT_NO_THROW(one_rank.throw_if_requested());
    EXPECT_EQ(one_rank.interrupted_by(), 0);
    ::raise(SIGTERM);
    EXPECT_EQ(one_rank.interrupted_by(), SIGTERM);
    try {
      one_rank.throw_if_requested();
      ADD_FAILURE() << "a SIGTERM did not stop the one-rank run";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "interrupted by SIGTERM (signal 15)");
    }
  }
  ASSERT_EQ(StopRequestGuard::received(), SIGTERM);  // the earlier request is still remembered
  const RunStopRequests rank_of_two(2);
  EXPECT_NO_THROW(rank_of_two.throw_if_requested());
  EXPECT_EQ(rank_of_two.interrupted_by(), 0);
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);  // no handler of a guard installed
}

}  // namespace
}  // namespace gpt
