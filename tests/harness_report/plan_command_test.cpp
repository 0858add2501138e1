// `harness plan` and `harness report` as programs: JSON output against the power fixture, estimates from a
// stored sweep, and bad input rejected with exit code 2 and a message naming the flag.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/launcher/process.h"
#include "harness/store/store.h"
#include "tests/harness/temp_dir.h"

namespace gpt::harness {
namespace {

const std::string kHarness = std::string(SPEEDRUN_BINARY_DIR) + "/bin/harness";

std::pair<int, std::string> run_harness(const testing::TempDir& dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {kHarness, "--db", (dir / "db.sqlite").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  Process p = Process::start(LaunchSpec{argv, dir / "out.txt", {}});
  const ExitInfo exit = p.wait();
  std::ifstream in(dir / "out.txt");
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(dir / "out.txt");
  return {exit.exited ? exit.exit_code : 128 + exit.signal, text.str()};
}

TEST(PlanCommand, JsonFromMeanAndStd) {
  ASSERT_TRUE(std::filesystem::exists(kHarness)) << "build the `harness` target first";
  testing::TempDir dir;
  const auto [code, out] = run_harness(dir, {"plan", "--mean", "3.275", "--std", "0.01", "--target", "3.28", "--alpha",
                                             "0.05", "--runs", "2,27", "--format", "json"});
  ASSERT_EQ(code, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j.at("runs_needed").get<int>(), 27);  // tests/fixtures/power_expected.json: d 0.5, alpha 0.05, power 0.8
  ASSERT_EQ(j.at("rows").size(), 2u);
  EXPECT_NEAR(j.at("rows")[1].at("power").get<double>(), 0.8118315517081675, 1e-7);
  EXPECT_LT(j.at("rows")[1].at("min_improvement").get<double>(), 0.005);
}

TEST(PlanCommand, FromAStoredSweepAndBadInput) {
  ASSERT_TRUE(std::filesystem::exists(kHarness)) << "build the `harness` target first";
  testing::TempDir dir;
  {
    Store store = Store::open(dir / "db.sqlite");
    SweepInfo sweep;
    sweep.name = "s";
    sweep.kind = "record";
    sweep.target = 3.28;
    sweep.alpha = 0.05;
    sweep.id = store.create_sweep(sweep);
    int seed = 0;
    for (const double loss : {3.265, 3.275, 3.285}) {  // mean 3.275, std 0.01
      RunRecord r;
      r.sweep_id = sweep.id;
      r.seed = seed++;
      r.run_id = "s-seed" + std::to_string(*r.seed);
      r.status = RunStatus::ok;
      r.final_val_loss = loss;
      store.add_run(r);
    }
  }
  const auto [code, out] = run_harness(dir, {"plan", "--sweep", "s", "--format", "json"});
  ASSERT_EQ(code, 0) << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0].at("ok_runs").get<int>(), 3);
  EXPECT_DOUBLE_EQ(j[0].at("alpha").get<double>(), 0.05);  // the sweep's alpha
  EXPECT_EQ(j[0].at("runs_needed").get<int>(), 27);

  const auto [report_code, report_out] = run_harness(dir, {"report", "--sweep", "s", "--out", (dir / "rep").string()});
  EXPECT_EQ(report_code, 0) << report_out;
  EXPECT_TRUE(std::filesystem::exists(dir / "rep" / "report.html"));
  EXPECT_TRUE(std::filesystem::exists(dir / "rep" / "report.md"));

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"plan", "--mean", "3.2"}, std::vector<std::string>{"plan", "--sweep", "missing"},
        std::vector<std::string>{"plan", "--sweep", "s", "--mean", "3", "--std", "1"},
        std::vector<std::string>{"plan", "--mean", "3", "--std", "1", "--runs", "1"}}) {
    const auto [bad_code, bad_out] = run_harness(dir, bad);
    EXPECT_EQ(bad_code, 2) << bad_out;
    EXPECT_NE(bad_out.find("--"), std::string::npos) << bad_out;  // names a flag
  }
}

}  // namespace
}  // namespace gpt::harness
