// Every write of the run log and of files written atomically (summary, checkpoints) is checked: a full disk is an
// error naming the file, never a silent loss.
#include <gtest/gtest.h>

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
