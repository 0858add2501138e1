// Every write of the run log and of files written atomically (summary, checkpoints) is checked: a full disk is an
// error naming the file, never a silent loss.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/check.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/run_log.h"

namespace gpt {
namespace {

TEST(RunLogWrites, FullDiskThrowsNamingTheLog) {
  RunLog log("/dev/full", true, false, false);
  try {
    log.line("step:1/2 train_time:1ms step_avg:1.00ms");
    FAIL() << "a write to /dev/full succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
  }
}

TEST(RunLogWrites, PlantedSymlinkIsNotWrittenThrough) {
  const auto dir = std::filesystem::temp_directory_path() / ("gpt_runlog_link_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "victim") << "keep"; }
  std::filesystem::create_symlink(dir / "victim", dir / "run.txt");
  std::string error;
  try {
    RunLog log(dir / "run.txt", true, false, false);
    log.line("step:1/2 train_time:1ms step_avg:1.00ms");
  } catch (const Error& e) {
    error = e.what();
  }
  std::ifstream victim(dir / "victim");
  const std::string kept((std::istreambuf_iterator<char>(victim)), {});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(kept, "keep");
  EXPECT_NE(error.find("symbolic link"), std::string::npos) << error;
}

TEST(RunLogWrites, DisabledLogWritesNothing) {
  RunLog log("/dev/full", false, false, false);
  EXPECT_NO_THROW(log.line("anything"));
}

TEST(RunLogWrites, AtomicWriteIntoAMissingFolderNamesTheTarget) {
  try {
    write_file_atomically("/nonexistent_folder_for_test/run.json", "{}");
    FAIL() << "the write succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt
