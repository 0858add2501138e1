// End-to-end tests of what makes the harness trustworthy unattended: nothing finished is lost (spool files,
// insert retries), trainers die with the harness and never run twice in one folder, only complete runs are
// `ok`, sweeps extend, imports name arms by path, skip duplicates and are atomic, and damaged, missing or
// read-only databases are handled as such.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "tests/harness/child_probe.h"
#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

using namespace std::chrono_literals;

using testing::alive;
using testing::read_pid;

class TrustE2E : public RecordE2E {
 protected:
  std::filesystem::path run_dir(const std::string& sweep, int seed) const {
    return dir / "runs" / sweep / (sweep + "-seed" + std::to_string(seed));
  }
  void wait_for_sweep(const std::string& name) {
    for (int i = 0; i < 1000; ++i) {
      if (std::filesystem::exists(db())) {
        try {
          Store store = Store::open(db(), sql::OpenOptions{true, 1000});
          if (store.find_sweep(name)) return;
        } catch (const gpt::Error&) {
        }
      }
      std::this_thread::sleep_for(10ms);
    }
    FAIL() << "sweep '" << name << "' never appeared";
  }
};

// Issue: a log cut right after an intermediate validation was stored as ok and counted.
TEST_F(TrustE2E, RunCutAtAValidationIsIncompleteAndTheReportShowsItsLastStep) {
  const Result r = record(2, {"--mean", "3.2"}, {}, {{"SYNTH_MODE", "cut"}, {"SYNTH_MODE_SEEDS", "1"}});
  auto stored = runs();
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(stored[0].status, RunStatus::ok);
  EXPECT_EQ(stored[1].status, RunStatus::incomplete) << stored[1].reason;
  EXPECT_EQ(stored[1].steps, 10);
  EXPECT_FALSE(stored[1].final_val_loss);
  EXPECT_NE(r.output.find("incomplete  step 10/20"), std::string::npos) << r.output;
  EXPECT_NE(read_file(dir / "reports" / "sweep" / "report.md").find("| 10/20 |"), std::string::npos);
}

TEST_F(TrustE2E, DeclaredEarlyStopStepMakesTheCutRunOk) {
  const Result r =
      record(2, {"--mean", "3.2"}, {"--early-stop-step", "10", "--target", "3.9"}, {{"SYNTH_MODE", "cut"}});
  ASSERT_EQ(r.code, 0) << r.output;
  for (const auto& run : runs()) EXPECT_EQ(run.status, RunStatus::ok) << run.reason;
}

// Issue: a database locked when runs finish made record exit 2 and drop the finished runs.
TEST_F(TrustE2E, RunFinishedWhileTheDatabaseIsLockedIsSpooledAndStoredLater) {
  std::vector<std::string> args = {"record", "--runs", "1", "--name", "sweep", "--db-timeout", "100", "--"};
  for (auto& a : synthetic({"--step-sleep-ms", "40", "--mean", "3.2"})) args.push_back(a);
  Process p = start(args);
  wait_for_sweep("sweep");
  // Take the lock once the run is under way (the sweep's own setup writes are done by then).
  for (int i = 0; i < 500 && !std::filesystem::exists(run_dir("sweep", 0) / "console.log"); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  {
    Store holder = Store::open(db());
    holder.db().exec("BEGIN IMMEDIATE");  // held until the harness has given up on the database
    const ExitInfo exit = p.wait();
    holder.db().exec("ROLLBACK");
    ASSERT_TRUE(exit.exited);
    EXPECT_NE(exit.exit_code, 2) << read_file(dir / "out.txt");
  }
  const std::string out = read_file(dir / "out.txt");
  EXPECT_NE(out.find("kept in its spool file"), std::string::npos) << out;
  const auto spool = run_dir("sweep", 0) / "run.spool.json";
  ASSERT_TRUE(std::filesystem::exists(spool)) << out;
  EXPECT_TRUE(runs().empty());

  const Result resumed = harness({"record", "--resume", "sweep"});
  EXPECT_EQ(resumed.code, 1) << resumed.output;  // one ok run: the t-test needs two
  EXPECT_NE(resumed.output.find("stored spooled run sweep-seed0 (ok)"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("0 run(s) to go of 1"), std::string::npos) << resumed.output;  // not re-run
  auto stored = runs();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].status, RunStatus::ok);
  EXPECT_EQ(stored[0].val_points.size(), 5u);
  EXPECT_FALSE(std::filesystem::exists(spool));
}

// A database busy when a sweep ends is not a failed record check (exit 1): its own code, and the way to store them.
TEST_F(TrustE2E, SpooledRunsExitWithTheirOwnCodeNamingResume) {
  std::vector<std::string> args = {"record",       "--runs", "1",        "--name", "sweep",
                                   "--db-timeout", "100",    "--target", "3.28",   "--"};
  for (auto& a : synthetic({"--step-sleep-ms", "40", "--mean", "3.2"})) args.push_back(a);
  Process p = start(args);
  wait_for_sweep("sweep");
  for (int i = 0; i < 500 && !std::filesystem::exists(run_dir("sweep", 0) / "console.log"); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  Store holder = Store::open(db());
  holder.db().exec("BEGIN EXCLUSIVE");
  const ExitInfo exit = p.wait();
  holder.db().exec("ROLLBACK");
  const std::string out = read_file(dir / "out.txt");
  ASSERT_TRUE(exit.exited) << out;
  EXPECT_EQ(exit.exit_code, 4) << out;
  EXPECT_NE(out.find("`harness record --resume sweep` stores them"), std::string::npos) << out;
}

// Issue: kill -9 of the harness left trainers running, and --resume started the same seed beside them.
TEST_F(TrustE2E, TrainersDieWithTheHarnessAndABusyRunFolderIsNotReused) {
  const std::string trainer = kBin + "synthetic_trainer --seed {seed} --run-id {run_id} --out {out} --mode hang";
  std::vector<std::string> args = {
      "record", "--runs",
      "1",      "--name",
      "sweep",  "--quiet",
      "--",     "sh",
      "-c",     "sleep 30 & echo $! > {out}/straggler.pid; echo $$ > {out}/trainer.pid; exec " + trainer};
  Process p = start(args);
  const pid_t trainer_pid = read_pid(run_dir("sweep", 0) / "trainer.pid");
  const pid_t straggler = read_pid(run_dir("sweep", 0) / "straggler.pid");
  ASSERT_GT(trainer_pid, 0);
  ASSERT_GT(straggler, 0);
  std::this_thread::sleep_for(200ms);  // the trainer has exec'd and hangs
  ASSERT_TRUE(alive(trainer_pid));
  ::kill(p.pid(), SIGKILL);
  p.wait();
  bool trainer_gone = false;
  for (int i = 0; i < 200 && !trainer_gone; ++i) {
    trainer_gone = !alive(trainer_pid);
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(trainer_gone) << "the trainer outlived the killed harness";
  if (!trainer_gone) ::kill(trainer_pid, SIGKILL);

  // The background process the trainer's script started still holds the run folder's lock.
  ASSERT_TRUE(alive(straggler));
  const Result resumed = harness({"record", "--resume", "sweep"});
  ::kill(straggler, SIGKILL);
  EXPECT_NE(resumed.output.find("is in use by another process"), std::string::npos) << resumed.output;
  EXPECT_TRUE(runs().empty()) << resumed.output;
}

// Issue: `--resume S --runs 10` was refused; a sweep could not be extended.
TEST_F(TrustE2E, ResumeWithMoreRunsExtendsTheSweep) {
  ASSERT_EQ(record(2, {"--mean", "3.2"}, {"--quiet"}).code, 0);
  std::map<std::int64_t, std::int64_t> ids;
  for (const auto& r : runs()) ids[*r.seed] = r.id;
  const Result extended = harness({"record", "--resume", "sweep", "--runs", "4", "--quiet"});
  ASSERT_EQ(extended.code, 0) << extended.output;
  EXPECT_NE(extended.output.find("4 run(s) stored of 4 planned"), std::string::npos) << extended.output;
  std::set<std::int64_t> seeds;
  for (const auto& r : runs()) {
    seeds.insert(*r.seed);
    if (ids.count(*r.seed)) {
      EXPECT_EQ(r.id, ids[*r.seed]) << "a finished run was re-run";
    }
  }
  EXPECT_EQ(seeds, (std::set<std::int64_t>{0, 1, 2, 3}));
  const Result shrink = harness({"record", "--resume", "sweep", "--runs", "3"});
  EXPECT_EQ(shrink.code, 2);
  EXPECT_NE(shrink.output.find("can only extend it"), std::string::npos) << shrink.output;
}

// Issue: two records started in the same second collided on the default sweep name (and a new database's
// first open could fail setting WAL mode).
TEST_F(TrustE2E, ConcurrentRecordsOnANewDatabaseGetDistinctSweeps) {
  std::vector<Process> started;
  std::vector<std::filesystem::path> outs;
  for (int i = 0; i < 4; ++i) {
    std::vector<std::string> argv = {kBin + "harness", "--db", db().string(), "record", "--runs", "2", "--quiet", "--"};
    for (auto& a : synthetic({"--mean", "3.2"})) argv.push_back(a);
    outs.push_back(dir / ("out" + std::to_string(i) + ".txt"));
    started.push_back(Process::start(LaunchSpec{argv, outs.back(), {}}));
  }
  for (size_t i = 0; i < started.size(); ++i) {
    const ExitInfo exit = started[i].wait();
    EXPECT_TRUE(exit.exited && exit.exit_code == 0) << read_file(outs[i]);
  }
  Store store = Store::open(db());
  const auto sweeps = store.sweeps();
  ASSERT_EQ(sweeps.size(), 4u);
  for (const auto& s : sweeps) EXPECT_EQ(store.runs(s.id).size(), 2u) << s.name;
}

TEST_F(TrustE2E, ReadingCommandsRefuseAMissingOrEmptyDatabasePath) {
  const auto missing = dir / "typo" / "speedrun.db";
  Process p =
      Process::start(LaunchSpec{{kBin + "harness", "--db", missing.string(), "query", "runs"}, dir / "o.txt", {}});
  const ExitInfo exit = p.wait();
  EXPECT_EQ(exit.exit_code, 2);
  EXPECT_NE(read_file(dir / "o.txt").find("no database at"), std::string::npos) << read_file(dir / "o.txt");
  EXPECT_FALSE(std::filesystem::exists(dir / "typo"));
  Process empty = Process::start(LaunchSpec{{kBin + "harness", "--db", "", "query", "sweeps"}, dir / "e.txt", {}});
  EXPECT_EQ(empty.wait().exit_code, 2);
  EXPECT_NE(read_file(dir / "e.txt").find("--db: the path is empty"), std::string::npos) << read_file(dir / "e.txt");
}

TEST_F(TrustE2E, ReadOnlyDatabaseCanBeQueried) {
  ASSERT_EQ(record(2, {"--mean", "3.2"}, {"--quiet"}).code, 0);
  const auto ro = dir / "ro";
  std::filesystem::create_directories(ro);
  std::filesystem::copy_file(db(), ro / "r.db");
  ::chmod((ro / "r.db").c_str(), 0444);
  ::chmod(ro.c_str(), 0555);
  std::vector<std::string> argv = {kBin + "harness", "--db", (ro / "r.db").string(), "query", "runs"};
  if (::geteuid() == 0) {  // root may write anything: query as an unprivileged user instead
    argv.insert(argv.begin(), {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
  }
  Process p = Process::start(LaunchSpec{argv, dir / "q.txt", {}});
  const ExitInfo exit = p.wait();
  ::chmod(ro.c_str(), 0755);
  const std::string out = read_file(dir / "q.txt");
  EXPECT_EQ(exit.exit_code, 0) << out;
  EXPECT_NE(out.find("sweep-seed1"), std::string::npos) << out;
}

// Issue: page-level corruption was not noticed: `query runs` printed garbage and record kept writing.
TEST_F(TrustE2E, DamagedPagesAreDetectedOnOpen) {
  ASSERT_EQ(record(3, {"--mean", "3.2"}, {"--quiet"}).code, 0);
  {
    // Overwrite the b-tree page header of every page after the first.
    const int fd = ::open(db().c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const auto size = std::filesystem::file_size(db());
    const std::string junk(8, '\xA5');
    for (std::uintmax_t page = 4096; page + 8 < size; page += 4096) {
      ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), static_cast<off_t>(page)), 8);
    }
    ::close(fd);
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"query", "runs"}, std::vector<std::string>{"record", "--resume", "sweep"}}) {
    const Result r = harness(args);
    EXPECT_EQ(r.code, 2) << r.output;
    // The schema itself fills more than the first page: damage there shows as soon as the schema is read.
    const bool refused = r.output.find("fails its integrity check") != std::string::npos ||
                         r.output.find("is not a valid SQLite database (corrupt") != std::string::npos;
    EXPECT_TRUE(refused) << r.output;
    EXPECT_NE(r.output.find(db().string()), std::string::npos) << r.output;
  }
}

TEST_F(TrustE2E, HistoryTakesBenchmarkNamesThatContainSlashes) {
  {
    Store store = Store::open(db());
    BenchmarkResult b;
    b.suite = "kernels_bench";
    b.name = "BM_Matmul/1024/64";
    b.value = 12.5;
    b.unit = "ns";
    store.add_benchmark_result(b);
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"query", "history", "--name", "BM_Matmul/1024/64", "--format", "csv"},
        std::vector<std::string>{"query", "history", "kernels_bench/BM_Matmul/1024/64", "--format", "csv"},
        std::vector<std::string>{"query", "history", "BM_Matmul/1024/64", "--format", "csv"}}) {
    const Result r = harness(args);
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("kernels_bench,BM_Matmul/1024/64"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace gpt::harness
