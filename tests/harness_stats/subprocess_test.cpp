// Child processes used by compare and nightly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/commands/subprocess.h"
#include "base/check.h"

namespace gpt::harness::commands {
namespace {

TEST(Subprocess, ExitStatusAndCapturedOutput) {
  EXPECT_EQ(run_process({{"sh", "-c", "exit 3"}, {}, {}, {}}), 3);
  EXPECT_EQ(capture_output({"sh", "-c", "echo hello; echo"}), "hello");
  EXPECT_EQ(capture_output({"pwd"}, "/"), "/");
  EXPECT_THROW(capture_output({"sh", "-c", "exit 1"}), gpt::Error);
  EXPECT_THROW(run_process({{"/nonexistent/program"}, {}, {}, {}}), gpt::Error);
}

TEST(Subprocess, StdoutAndStderrIntoOneFile) {
  const auto path = std::filesystem::temp_directory_path() / "harness_subprocess_test.txt";
  ASSERT_EQ(run_process({{"sh", "-c", "echo out; echo err >&2"}, {}, path, path}), 0);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "out\nerr\n");
  std::filesystem::remove(path);
  EXPECT_EQ(join_command({"a", "b c"}), "a 'b c'");
}

}  // namespace
}  // namespace gpt::harness::commands
