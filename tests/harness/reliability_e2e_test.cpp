// Bad names, planted links and bad Slurm options, driven through the real `harness` program: each is one clear
// error naming the flag or file, and nothing is written outside the database's folder or through a link.
#include <gtest/gtest.h>

#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

using ReliabilityE2E = RecordE2E;

TEST_F(ReliabilityE2E, SweepNameThatIsAPathIsRefused) {
  const auto outside = dir / "outside" / "name";
  for (const std::string& name : {outside.string(), std::string("../../x"), std::string(".."), std::string("a\nb")}) {
    const Result r = harness({"record", "--runs", "1", "--target", "3.28", "--name", name, "--",
                              kBin + "synthetic_trainer", "--seed", "{seed}", "--run-id", "{run_id}", "--out", "{out}"});
    EXPECT_EQ(r.code, 2) << name << ": " << r.output;
    EXPECT_NE(r.output.find("--name"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "outside"));
  EXPECT_FALSE(std::filesystem::exists(dir.path().parent_path() / "x"));
}

TEST_F(ReliabilityE2E, NewlineInSlurmPartitionIsRefusedBeforeAnyJob) {
  const auto tools = dir / "tools";
  script("tools/sbatch", "touch " + (dir / "sbatch-ran").string() + "\necho 1\n");
  const Result r = harness({"record", "--runs", "1", "--target", "3.28", "--name", "s", "--launcher", "slurm",
                            "--slurm-partition", "gpu\nid > " + (dir / "INJ").string(), "--", "true"},
                           {path_with(tools)});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--slurm-partition"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "sbatch-ran"));
  EXPECT_FALSE(std::filesystem::exists(dir / "INJ"));
}

TEST_F(ReliabilityE2E, PlantedLinkToARunFolderIsNotFollowed) {
  std::filesystem::create_directories(dir / "runs");
  std::filesystem::create_directories(dir / "victim");
  std::filesystem::create_directory_symlink(dir / "victim", dir / "runs" / "sweep");
  const Result r = record(1, {"--mean", "3.20"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("symbolic link"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(dir / "victim"));
}

TEST_F(ReliabilityE2E, PlantedLinksAtConsoleLogAndReportAreNotWrittenThrough) {
  const auto victim = dir.write("victim.txt", "keep");
  std::filesystem::create_directories(dir / "runs" / "sweep" / "sweep-seed0");
  std::filesystem::create_symlink(victim, dir / "runs" / "sweep" / "sweep-seed0" / "console.log");
  std::filesystem::create_directories(dir / "reports" / "sweep");
  std::filesystem::create_symlink(victim, dir / "reports" / "sweep" / "report.md");
  const Result r = record(1, {"--mean", "3.20"});
  EXPECT_EQ(r.code, 1) << r.output;  // the run could not start: stored `failed`, naming the link
  const auto stored = runs();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].status, RunStatus::failed);
  EXPECT_NE(stored[0].reason.find("console.log' is a symbolic link"), std::string::npos) << stored[0].reason;
  EXPECT_EQ(read_file(victim), "keep");
  EXPECT_FALSE(std::filesystem::is_symlink(dir / "reports" / "sweep" / "report.md"));
}

}  // namespace
}  // namespace gpt::harness
