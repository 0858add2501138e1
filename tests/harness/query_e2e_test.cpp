// `harness query`: what it counts as ok, what it averages, which SQL it runs, and that output it could not write
// is a failure.
#include <sys/wait.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

std::string log_with_loss(double loss) {
  return "step:0/10 val_loss:10.8000 train_time:0ms step_avg:0.00ms\nstep:10/10 val_loss:" + std::to_string(loss) +
         " train_time:900ms step_avg:90.00ms\n";
}

// A row stored ok whose loss was edited to -3 reads back as failed in every report: the queries counted it as ok.
TEST_F(RecordE2E, QueryCountsATamperedRowAsFailedNotOk) {
  dir.write("logs/a.txt", log_with_loss(3.25));
  dir.write("logs/b.txt", log_with_loss(3.27));
  ASSERT_LE(harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.5"}).code, 1);
  {
    Store store = Store::open(db());
    store.db().exec("UPDATE runs SET final_val_loss = -3 WHERE id = (SELECT MIN(id) FROM runs)");
  }
  const Result runs = harness({"query", "runs", "--format", "json"});
  ASSERT_EQ(runs.code, 0) << runs.output;
  const auto rows = nlohmann::json::parse(runs.output);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["status"], "failed") << rows.dump();
  EXPECT_EQ(rows[1]["status"], "ok") << rows.dump();

  const Result sweeps = harness({"query", "sweeps", "--format", "json"});
  ASSERT_EQ(sweeps.code, 0) << sweeps.output;
  const auto sweep = nlohmann::json::parse(sweeps.output)[0];
  EXPECT_EQ(sweep["stored"], 2);
  EXPECT_EQ(sweep["ok"], 1) << sweep.dump();
  EXPECT_DOUBLE_EQ(sweep["mean_val_loss"].get<double>(), 3.27) << sweep.dump();
}

// Two arms (a split import, or a comparison) are two experiments: no one mean over both.
TEST_F(RecordE2E, QuerySweepsGivesNoMeanOverSeveralArms) {
  dir.write("logs/x/a.txt", log_with_loss(3.0));
  dir.write("logs/y/b.txt", log_with_loss(4.0));
  ASSERT_LE(harness({"import", (dir / "logs").string(), "--name", "split", "--target", "3.5"}).code, 1);
  const Result sweeps = harness({"query", "sweeps", "--format", "json"});
  ASSERT_EQ(sweeps.code, 0) << sweeps.output;
  const auto sweep = nlohmann::json::parse(sweeps.output)[0];
  EXPECT_EQ(sweep["arms"], 2) << sweep.dump();
  EXPECT_TRUE(sweep["mean_val_loss"].is_null()) << sweep.dump();  // was 3.5, the mean of both arms
}

TEST_F(RecordE2E, QuerySqlRefusesASecondStatement) {
  dir.write("logs/a.txt", log_with_loss(3.25));
  ASSERT_LE(harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.5"}).code, 1);
  const Result r = harness({"query", "sql", "SELECT 1; DELETE FROM runs"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("one SQL statement at a time; another follows the first: ' DELETE FROM runs'"),
            std::string::npos)
      << r.output;
  // Whitespace and a comment after the statement are no second statement.
  EXPECT_EQ(harness({"query", "sql", "SELECT 1;  -- the answer\n"}).code, 0);
}

// VACUUM INTO wrote a new database file from the read-only connection.
TEST_F(RecordE2E, QuerySqlWritesNoFile) {
  dir.write("logs/a.txt", log_with_loss(3.25));
  ASSERT_LE(harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.5"}).code, 1);
  const auto copy = dir / "copy.db";
  const Result r = harness({"query", "sql", "  vacuum INTO '" + copy.string() + "'"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("read-only statements only"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(copy));
}

// `harness query runs > /dev/full` exited 0: output that was never written is a failure.
TEST_F(RecordE2E, AnOutputThatCannotBeWrittenIsAFailure) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  dir.write("logs/a.txt", log_with_loss(3.25));
  ASSERT_LE(harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.5"}).code, 1);
  const std::string command =
      kBin + "harness --db '" + db().string() + "' query runs > /dev/full 2> '" + (dir / "err.txt").string() + "'";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(read_file(dir / "err.txt").find("could not be written to standard output"), std::string::npos)
      << read_file(dir / "err.txt");
}

// A log whose file name is not UTF-8 was imported, and then every `query runs --format json` and `report` of the
// database failed with a raw json exception.
TEST_F(RecordE2E, ANameThatIsNotUtf8LeavesJsonOutputsWorking) {
  dir.write("logs/run-\xff\xfe.txt", log_with_loss(3.25));
  dir.write("logs/ok.txt", log_with_loss(3.26));
  const Result imported =
      harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.5", "--format", "json"});
  ASSERT_LE(imported.code, 1) << imported.output;
  const Result runs = harness({"query", "runs", "--format", "json"});
  ASSERT_EQ(runs.code, 0) << runs.output;
  EXPECT_EQ(nlohmann::json::parse(runs.output).size(), 2u);
  const Result report = harness({"report", "--sweep", "sweep"});
  EXPECT_LE(report.code, 1) << report.output;
  EXPECT_EQ(report.output.find("invalid UTF-8"), std::string::npos) << report.output;
}

// A zero-length file was "schema version 0 and needs migrating"; a folder was "no database at".
TEST_F(RecordE2E, AnEmptyFileOrAFolderIsNamedForWhatItIs) {
  const auto empty = dir.write("empty.db", "");
  const Result r = harness_without_db({"--db", empty.string(), "query", "sweeps"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("empty.db' is an empty file, not a database"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("schema version"), std::string::npos) << r.output;

  std::filesystem::create_directories(dir / "folder.db");
  for (const char* command : {"sweeps", "runs"}) {
    const Result f = harness_without_db({"--db", (dir / "folder.db").string(), "query", command});
    EXPECT_EQ(f.code, 2) << f.output;
    EXPECT_NE(f.output.find("folder.db' is a folder, not a database file"), std::string::npos) << f.output;
  }
  const Result w = harness_without_db({"--db", (dir / "folder.db").string(), "import", empty.string()});
  EXPECT_EQ(w.code, 2) << w.output;
  EXPECT_NE(w.output.find("is a folder, not a database file"), std::string::npos) << w.output;
}

}  // namespace
}  // namespace gpt::harness

namespace gpt::harness {
namespace {

TEST_F(RecordE2E, AnErrorEchoesNoRawControlBytes) {
  dir.write("logs/a.txt", log_with_loss(3.25));
  ASSERT_LE(harness({"import", (dir / "logs").string(), "--name", "sweep", "--target", "3.5"}).code, 1);
  const Result r = harness({"query", "runs", "--sweep", "\x1b[2Jgone\xff"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("no sweep '\\x1b[2Jgone\\xff'"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gpt::harness
