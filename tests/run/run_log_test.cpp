#include "trainer/run/run_log.h"

#include <cmath>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "trainer/run/backend.h"

namespace gpt {
namespace {

TEST(RunLogLines, ValidationLineMatchesSpeedrunFormat) {
  EXPECT_EQ(validation_line(1390, 1390, 3.27751, 79532.4),
            "step:1390/1390 val_loss:3.2775 train_time:79532ms step_avg:57.22ms");
  // step 0 divides by max(s, 1)
  EXPECT_EQ(validation_line(0, 26, 10.83, 12.6), "step:0/26 val_loss:10.8300 train_time:13ms step_avg:12.60ms");
}

TEST(RunLogLines, TrainingLine) {
  EXPECT_EQ(training_line(3, 26, 100.0), "step:3/26 train_time:100ms step_avg:33.33ms");
}

TEST(RunLogLines, PeakMemoryLine) {
  EXPECT_EQ(peak_memory_line(30220, 38672), "peak memory allocated: 30220 MiB reserved: 38672 MiB");
}

TEST(RunLogLines, NonFiniteLossPrintsLikePython) {
  EXPECT_EQ(validation_line(2, 4, std::nan(""), 10.0), "step:2/4 val_loss:nan train_time:10ms step_avg:5.00ms");
}

TEST(RunLog, WritesFlushedLinesAndAppends) {
  const auto path = std::filesystem::temp_directory_path() / "gpt_run_log_test.txt";
  {
    RunLog log(path, true, false, false);
    log.line("a");
    std::ifstream in(path);  // flushed while the log is still open
    std::string first;
    std::getline(in, first);
    EXPECT_EQ(first, "a");
  }
  { RunLog(path, true, true, false).line("b"); }
  { RunLog(path, false, false, false).line("not written by other ranks"); }
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(all, "a\nb\n");
  std::filesystem::remove(path);
}

TEST(RunEnvironment, DescribesThisMachine) {
  const RunEnvironment env = describe_environment("cpu", 2);
  EXPECT_FALSE(env.hostname.empty());
  EXPECT_FALSE(env.cpu.empty());
  EXPECT_EQ(env.threads, 2);
  EXPECT_FALSE(env.compiler.empty());
  const auto j = env.to_json();
  EXPECT_EQ(j.at("backend"), "cpu");
  EXPECT_TRUE(j.contains("git_commit"));
  EXPECT_EQ(j.at("threads"), 2);
  EXPECT_GT(peak_rss_mib(), 0);
}

// The compiler is named with its version ("GCC 12.2.0", "Clang 16.0.6"), not by a bare version number.
TEST(RunEnvironment, NamesTheCompilerWithItsVersion) {
  const std::string compiler = describe_environment("cpu", 1).compiler;
  EXPECT_TRUE(compiler.rfind("GCC ", 0) == 0 || compiler.find("lang") != std::string::npos) << compiler;
  EXPECT_NE(compiler.find_first_of("0123456789"), std::string::npos) << compiler;
}

// A CPU run has no GPU: the summary's GPU fields are there, empty (a CUDA run fills them: tests/gpu).
TEST(RunEnvironment, CpuRunLeavesTheGpuFieldsEmpty) {
  RunEnvironment env = describe_environment("cpu", 1);
  describe_gpu(Device::cpu, env);
  const auto j = env.to_json();
  for (const char* field : {"gpu", "gpu_uuid", "driver", "cuda", "nccl", "gpu_clocks", "gpu_power_limit"}) {
    ASSERT_TRUE(j.contains(field)) << field;
    EXPECT_EQ(j.at(field), "") << field;
  }
}

}  // namespace
}  // namespace gpt
