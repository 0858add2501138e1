// Errors that surfaced as a library's own message (a filesystem or Boost exception) name the flag, variable or file
// and what was expected instead, with exit 2.
#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

TEST_F(RecordE2E, AMissingTmpdirIsNamed) {
  const Result r =
      harness({"record", "--runs", "1", "--name", "t", "--trainer", "/bin/true", "--data", dir.path().string()},
              {{"TMPDIR", (dir / "nonexistent").string()}});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("TMPDIR: '" + (dir / "nonexistent").string() + "' is not a folder"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("temp_directory_path"), std::string::npos) << r.output;
}

TEST_F(RecordE2E, ImportOfADeviceSaysWhatItIsNot) {
  const Result r = harness({"import", "/dev/null"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("import: '/dev/null' is neither a log file nor a folder of them"), std::string::npos)
      << r.output;
}

TEST_F(RecordE2E, ReportOutThatIsAFileIsNamed) {
  dir.write("logs/a.txt", "step:10/10 val_loss:3.25 train_time:900ms step_avg:90ms\n");
  ASSERT_LE(harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.5"}).code, 1);
  const auto file = dir.write("taken", "a file");
  const Result r = harness({"report", "--sweep", "sweep", "--out", file.string()});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--out: '" + file.string() + "' exists and is not a folder"), std::string::npos) << r.output;
}

// A symbolic link planted at reports/<sweep> was found only after every run had been made.
TEST_F(RecordE2E, APlantedReportsLinkIsFoundBeforeAnyRun) {
  std::filesystem::create_directories(dir / "victim");
  std::filesystem::create_directories(dir / "reports");
  std::filesystem::create_directory_symlink(dir / "victim", dir / "reports" / "sweep");
  const Result r = record(2, {});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("symbolic link"), std::string::npos) << r.output;
  EXPECT_TRUE(runs().empty()) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(dir / "victim"));
}

}  // namespace
}  // namespace gpt::harness

namespace gpt::harness {
namespace {

// A missing --data made every run fail one by one into a junk sweep, exit 1; it is found before any run, exit 2.
TEST_F(RecordE2E, AMissingDataFolderIsFoundBeforeTheFirstRun) {
  const Result r = record(2, {"--data", "{data}"}, {"--data", (dir / "no-such-data").string()});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--data: no folder '" + (dir / "no-such-data").string() + "'"), std::string::npos)
      << r.output;
  Store store = Store::open(db());
  EXPECT_TRUE(store.sweeps().empty());
}

}  // namespace
}  // namespace gpt::harness
