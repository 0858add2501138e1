// Bad names, planted links and bad Slurm options, driven through the real `harness` program: each is one clear
// error naming the flag or file, and nothing is written outside the database's folder or through a link.
#include <gtest/gtest.h>

#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

using ReliabilityE2E = RecordE2E;

TEST_F(ReliabilityE2E, SweepNameThatIsAPathIsRefused) {
  const auto outside = dir / "outside" / "name";
  const std::string climbed = dir.path().filename().string() + "-climbed";  // `../../` of runs/ or reports/
  for (const std::string& name : {outside.string(), "../../" + climbed, std::string(".."), std::string("a\nb")}) {
    std::vector<std::string> args = {"record", "--runs", "1", "--target", "3.28", "--name", name, "--"};
    for (auto& a : synthetic()) args.push_back(a);
    const Result r = harness(args);
    EXPECT_EQ(r.code, 2) << name << ": " << r.output;
    EXPECT_NE(r.output.find("--name"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "outside"));
  EXPECT_FALSE(std::filesystem::exists(dir.path().parent_path() / climbed));
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
  EXPECT_EQ(r.code, 1) << r.output;  // one run is too few for the record check
  const auto stored = runs();
  ASSERT_EQ(stored.size(), 1u);
  // The attempt's empty run folder lost the link (the link itself, not what it pointed to); the run wrote its own.
  EXPECT_EQ(stored[0].status, RunStatus::ok) << stored[0].reason;
  EXPECT_FALSE(std::filesystem::is_symlink(dir / "runs" / "sweep" / "sweep-seed0" / "console.log"));
  EXPECT_EQ(read_file(victim), "keep");
  EXPECT_FALSE(std::filesystem::is_symlink(dir / "reports" / "sweep" / "report.md"));
}

// A negative value is one short line: the range CLI11 printed ended in DBL_MAX written out in 310 digits.
TEST_F(ReliabilityE2E, NegativeDbTimeoutIsAShortError) {
  const Result r = harness({"--db-timeout", "-1", "query", "sweeps"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--db-timeout"), std::string::npos) << r.output;
  EXPECT_LT(r.output.size(), 200u) << r.output;
}

const std::string kLogHead = "step:0/10 val_loss:10.8000 train_time:0ms step_avg:0ms\n";
std::string final_line(const std::string& loss) {
  return "step:10/10 val_loss:" + loss + " train_time:900ms step_avg:90ms\n";
}

TEST_F(ReliabilityE2E, NegativeFinalLossesAreStoredFailedAndNeverPass) {
  dir.write("logs/a.txt", kLogHead + final_line("-6.92"));
  dir.write("logs/b.txt", kLogHead + final_line("-6.93"));
  const Result r = harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.28"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(r.output.find("result: PASS"), std::string::npos) << r.output;
  for (const auto& run : runs()) {
    EXPECT_EQ(run.status, RunStatus::failed);
    EXPECT_NE(run.reason.find("negative"), std::string::npos) << run.reason;
  }
}

TEST_F(ReliabilityE2E, InfSummaryBesideARealLogIsStoredFailedAndReportsStillWork) {
  dir.write("logs/a.txt", kLogHead + final_line("3.2000"));
  dir.write("logs/a.json", R"({"run_id":"a","final_val_loss":"inf","steps":10,"total_steps":10})");
  dir.write("logs/b.txt", kLogHead + final_line("3.2100"));
  const Result r = harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.28"});
  EXPECT_NE(r.code, 2) << r.output;
  const auto stored = runs();
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(stored[0].status, RunStatus::failed);
  EXPECT_NE(stored[0].reason.find("diverged"), std::string::npos) << stored[0].reason;
  const Result report = harness({"report", "--sweep", "sweep"});
  EXPECT_EQ(report.code, 0) << report.output;
}

TEST_F(ReliabilityE2E, SummaryOfAnotherRunBesideALogIsStoredFailed) {
  dir.write("logs/a.txt", kLogHead + final_line("9.0815"));
  dir.write("logs/a.json", R"({"run_id":"tiny-seed1","final_val_loss":6.9618,"steps":10,"total_steps":10})");
  dir.write("logs/b.txt", kLogHead + final_line("3.2100"));
  dir.write("logs/b.json", R"({"run_id":"b","status":"diverged","final_val_loss":null,"steps":10,"total_steps":10})");
  harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.28"});
  const auto stored = runs();
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(stored[0].status, RunStatus::failed);
  EXPECT_NE(stored[0].reason.find("is of run 'tiny-seed1'"), std::string::npos) << stored[0].reason;
  EXPECT_EQ(stored[1].status, RunStatus::failed);
  EXPECT_NE(stored[1].reason.find("diverged"), std::string::npos) << stored[1].reason;
}

TEST_F(ReliabilityE2E, CutAndContradictoryLogsAreNeverOk) {
  dir.write("logs/cut.txt", kLogHead + "step:10/10 val_loss:3.2000 train_time:9");  // cut inside the time
  dir.write("logs/twice.txt", kLogHead + final_line("3.2000") + final_line("3.1000"));
  harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.28"});
  const auto stored = runs();
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(stored[0].status, RunStatus::incomplete) << stored[0].reason;
  EXPECT_EQ(stored[1].status, RunStatus::failed);
  EXPECT_NE(stored[1].reason.find("two different final validations"), std::string::npos) << stored[1].reason;
}

TEST_F(ReliabilityE2E, CheckDbFindsAValueChangedInsideAStoredRow) {
  dir.write("logs/a.txt", kLogHead + final_line("3.2000"));
  dir.write("logs/b.txt", kLogHead + final_line("3.2100"));
  ASSERT_NE(harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.28"}).code, 2);
  Result check = harness({"check-db"});
  EXPECT_EQ(check.code, 0) << check.output;
  EXPECT_NE(check.output.find("2 run(s) match their checksums, 0 do not"), std::string::npos) << check.output;
  {
    Store store = Store::open(db());
    store.db().exec("UPDATE runs SET final_val_loss = 3.1000 WHERE run_id = 'b'");
  }
  check = harness({"check-db"});
  EXPECT_EQ(check.code, 1) << check.output;
  EXPECT_NE(check.output.find("checksum mismatch: run 2 (sweep 1, run id b)"), std::string::npos) << check.output;
}

}  // namespace
}  // namespace gpt::harness
