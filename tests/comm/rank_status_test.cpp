// What each rank of `train_gpt --ranks N` leaves for its launcher (rank_status.h): the files a rank writes, how the
// launcher reads them, and the sentence that names the ranks that did not finish and how they ended.
#include "trainer/comm/rank_status.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

namespace gpt {
namespace {

namespace fs = std::filesystem;

class RankStatus : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rank-status-" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (const char* var : {kRankStatusDirVar, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}) {
      ::unsetenv(var);
    }
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(RankStatus, SignalNames) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
}

TEST_F(RankStatus, NothingIsWrittenOutsideALaunchThatAsks) {
  ::unsetenv(kRankStatusDirVar);
  record_rank_start();
  record_rank_end(1, "boom");
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(RankStatus, ARankRecordsItsPidAndHowItEnded) {
  ::setenv(kRankStatusDirVar, dir_.c_str(), 1);
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  ::setenv("LOCAL_WORLD_SIZE", "2", 1);
  record_rank_start();
  EXPECT_EQ(recorded_rank_pids(dir_, 2), (std::vector<pid_t>{::getpid()}));
  record_rank_end(1, "rank 1: debug.fault: injected error\nsecond line");
  std::ofstream(dir_ / "rank0.sig") << "SIGTERM\nSIGINT\n";  // what rank 0's handler notes
  const std::vector<RankEnd> ends = read_rank_ends(dir_, 2);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_FALSE(ends[0].pid.has_value());
  EXPECT_FALSE(ends[0].exit_code.has_value());
  EXPECT_EQ(ends[0].signals, "SIGTERM, SIGINT");
  EXPECT_EQ(ends[1].signals, "");  // its own file exists (opened at the start) and is empty
  EXPECT_EQ(ends[1].pid, ::getpid());
  EXPECT_EQ(ends[1].exit_code, 1);
  EXPECT_EQ(ends[1].reason, "rank 1: debug.fault: injected error");
}

// mpirun reports one code for the job (137: a rank died of SIGKILL); the sentence names the rank from the files.
TEST_F(RankStatus, DescriptionNamesTheRankAndHowItEnded) {
  std::vector<RankEnd> ends(3);
  for (int r = 0; r < 3; ++r) {
    ends[r].rank = r;
    ends[r].pid = 100 + r;
  }
  ends[0].exit_code = 1;
  ends[0].reason = "rank 0: interrupted by SIGTERM (signal 15)";
  ends[2].exit_code = 0;
  EXPECT_EQ(describe_rank_ends(ends, 137),
            "rank 0 exited with code 1 (rank 0: interrupted by SIGTERM (signal 15)); rank 1 ended without a status: "
            "killed by SIGKILL (mpirun's exit status 137) or crashed");
  EXPECT_EQ(describe_rank_ends(ends, 1),
            "rank 0 exited with code 1 (rank 0: interrupted by SIGTERM (signal 15)); rank 1 ended without a status: "
            "killed (e.g. SIGKILL, the OOM killer) or crashed");
  ends[1].signals = "SIGTERM";  // mpirun stopped it after another rank died
  EXPECT_EQ(describe_rank_ends(ends, 137),
            "rank 0 exited with code 1 (rank 0: interrupted by SIGTERM (signal 15)); rank 1 received SIGTERM (mpirun "
            "stopping the job, or a launcher) and ended without a status");
  ends[1].pid.reset();
  EXPECT_NE(describe_rank_ends(ends, 1).find("rank 1 left no status (it never started"), std::string::npos);
  for (RankEnd& e : ends) e.exit_code = 0;
  EXPECT_EQ(describe_rank_ends(ends, 0), "");
}

}  // namespace
}  // namespace gpt
