// `harness record --launcher slurm` against a real one-node Slurm (munged, slurmctld, slurmd started by
// tests/scripts/mini-slurm in a temp folder): a passing sweep, then a sweep whose harness is killed after
// submitting, one job cancelled, and `--resume` adopting the surviving job instead of resubmitting it.
// Skips with the reason when not root or when the Slurm/munge daemons are not installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "harness/launcher/process.h"
#include "harness/launcher/slurm_util.h"
#include "harness/store/store.h"
#include "tests/harness/temp_dir.h"

namespace gpt::harness {
namespace {

const std::string kBin = std::string(SPEEDRUN_BINARY_DIR) + "/bin/";
const std::string kMiniSlurm = std::string(SPEEDRUN_FIXTURES_DIR) + "/../scripts/mini-slurm";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string job_id_of(const std::filesystem::path& run_dir) {
  return nlohmann::json::parse(read_file(run_dir / "slurm_job.json")).at("job_id").get<std::string>();
}

class SlurmCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: slurmctld/slurmd run as SlurmUser=root";
    ASSERT_TRUE(std::filesystem::exists(kBin + "harness") && std::filesystem::exists(kBin + "synthetic_trainer"))
        << "build the `harness` and `synthetic_trainer` targets first (" << kBin << ")";
    const auto r = slurm::run_command({kMiniSlurm, "start", (dir / "slurm").string()});
    if (r.status == 77) GTEST_SKIP() << r.err;
    ASSERT_EQ(r.status, 0) << r.err;
    started_ = true;
    ::setenv("SLURM_CONF", (dir / "slurm" / "slurm.conf").c_str(), 1);
  }
  void TearDown() override {
    if (started_) slurm::run_command({"scancel", "--name=s2"});
    if (started_) slurm::run_command({kMiniSlurm, "stop", (dir / "slurm").string()});
    ::unsetenv("SLURM_CONF");
  }

  std::vector<std::string> record(const std::string& name, std::vector<std::string> extra) const {
    std::vector<std::string> argv = {
        kBin + "harness", "--db", (dir / "db.sqlite").string(), "record", "--name", name, "--launcher", "slurm",
        "--slurm-poll",   "0.3"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  std::pair<int, std::string> run(const std::vector<std::string>& argv, const std::string& log) const {
    Process p = Process::start(LaunchSpec{argv, dir / log, {}});
    const ExitInfo exit = p.wait();
    return {exit.exited ? exit.exit_code : 128 + exit.signal, read_file(dir / log)};
  }
  std::vector<std::string> trainer(std::vector<std::string> extra) const {
    std::vector<std::string> argv = {
        "--", kBin + "synthetic_trainer", "--seed", "{seed}", "--run-id", "{run_id}", "--out", "{out}", "--mean",
        "3.2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  testing::TempDir dir;
  bool started_ = false;
};

TEST_F(SlurmCluster, RecordsASweepAndResumesAfterTheHarnessIsGone) {
  // 1. Three runs as three jobs: all ok, the record passes, each run folder names its job.
  auto args = record("s1", {"--runs", "3"});
  for (auto& a : trainer({})) args.push_back(a);
  const auto [code, out] = run(args, "s1.txt");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("submitted as Slurm job"), std::string::npos) << out;
  EXPECT_NE(out.find("result: PASS"), std::string::npos) << out;
  Store store = Store::open(dir / "db.sqlite");
  const auto s1 = store.find_sweep("s1");
  ASSERT_TRUE(s1);
  const auto runs = store.runs(s1->id);
  ASSERT_EQ(runs.size(), 3u);
  for (const auto& r : runs) {
    EXPECT_EQ(r.status, RunStatus::ok) << r.run_id << ": " << r.reason;
    const auto run_dir = dir / "runs" / "s1" / r.run_id;
    const std::string job = job_id_of(run_dir);
    EXPECT_EQ(r.log_path, (run_dir / ("slurm-" + job + ".log")).string());
    EXPECT_EQ(read_file(run_dir / ("slurm-" + job + ".exit")), "0\n");
  }
  EXPECT_EQ(store.params(OwnerKind::sweep, s1->id).at("launcher"), "slurm");
  EXPECT_TRUE(std::filesystem::exists(dir / "reports" / "s1" / "report.html"));

  // 2. Slow runs; the submitting harness is killed once both jobs exist, one job is cancelled, and
  //    --resume (a new harness) adopts the other job rather than submitting it again.
  auto slow = record("s2", {"--runs", "2"});
  for (auto& a : trainer({"--steps", "40", "--step-sleep-ms", "100"})) slow.push_back(a);
  {
    Process submitter = Process::start(LaunchSpec{slow, dir / "s2-first.txt", {}});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    const auto run0 = dir / "runs" / "s2" / "s2-seed0", run1 = dir / "runs" / "s2" / "s2-seed1";
    while (!(std::filesystem::exists(run0 / "slurm_job.json") && std::filesystem::exists(run1 / "slurm_job.json"))) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << read_file(dir / "s2-first.txt");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    submitter.terminate(std::chrono::milliseconds(0));  // SIGKILL soon after: the harness is gone
  }
  const std::string job0 = job_id_of(dir / "runs" / "s2" / "s2-seed0");
  const std::string job1 = job_id_of(dir / "runs" / "s2" / "s2-seed1");
  ASSERT_EQ(slurm::run_command({"scancel", job1}).status, 0);
  const auto [code2, out2] =
      run({kBin + "harness", "--db", (dir / "db.sqlite").string(), "record", "--resume", "s2"}, "s2-resume.txt");
  EXPECT_EQ(code2, 1) << out2;  // one ok run is too few for the t-test
  EXPECT_NE(out2.find("adopting Slurm job " + job0), std::string::npos) << out2;
  EXPECT_EQ(out2.find("submitted as Slurm job"), std::string::npos) << out2;
  const auto s2 = store.find_sweep("s2");
  ASSERT_TRUE(s2);
  for (const auto& r : store.runs(s2->id)) {
    if (r.seed == 0) {
      EXPECT_EQ(r.status, RunStatus::ok) << r.reason;
    } else {
      EXPECT_EQ(r.status, RunStatus::killed) << r.reason;
      EXPECT_NE(r.reason.find("Slurm job " + job1 + " CANCELLED"), std::string::npos) << r.reason;
    }
  }
  EXPECT_EQ(job_id_of(dir / "runs" / "s2" / "s2-seed0"), job0);

  // 3. Another --resume re-runs only the cancelled seed, as a new job.
  const auto [code3, out3] =
      run({kBin + "harness", "--db", (dir / "db.sqlite").string(), "record", "--resume", "s2"}, "s2-resume2.txt");
  EXPECT_EQ(code3, 0) << out3;
  EXPECT_NE(out3.find("seed 1: submitted as Slurm job"), std::string::npos) << out3;
  EXPECT_NE(job_id_of(dir / "runs" / "s2" / "s2-seed1"), job1);
}

}  // namespace
}  // namespace gpt::harness
