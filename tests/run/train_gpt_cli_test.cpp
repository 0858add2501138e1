// End-to-end: runs the built train_gpt binary as the harness does and checks the contract (ARCHITECTURE.md):
// log lines, summary fields, exit codes 0 / 2 / 3. The runs start bin/standin_train_gpt, the same program on the
// stand-in model (tests/programs/standin_train_gpt.cpp), which takes seconds where the GPT takes minutes.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_test_util.h"

namespace gpt {
namespace {

using test::Outcome;
using test::RunScratch;

TEST(TrainGptCli, FinishedRunFollowsTheContract) {
  RunScratch scratch;
  const Outcome o = test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "e2e"));
  ASSERT_EQ(o.exit_code, 0) << o.stderr_text;

  const std::regex val_re(R"(step:(\d+)/(\d+) val_loss:(\d+\.\d{4}) train_time:(\d+)ms step_avg:(\d+\.\d{2})ms)");
  const std::regex train_re(R"(step:(\d+)/(\d+) train_time:(\d+)ms step_avg:(\d+\.\d{2})ms)");
  const std::regex mem_re(R"(peak memory allocated: (\d+) MiB reserved: (\d+) MiB)");
  std::ifstream log(scratch.out() / "e2e.txt");
  std::vector<double> val_losses;
  int train_lines = 0, mem_lines = 0;
  int64_t last_train_step = 0;
  for (std::string line; std::getline(log, line);) {
    std::smatch m;
    if (std::regex_match(line, m, val_re)) {
      EXPECT_EQ(m[2], "8");
      val_losses.push_back(std::stod(m[3]));
    } else if (std::regex_match(line, m, train_re)) {
      ++train_lines;
      EXPECT_EQ(std::stoll(m[1]), last_train_step + 1);
      last_train_step = std::stoll(m[1]);
    } else if (std::regex_match(line, m, mem_re)) {
      ++mem_lines;
      EXPECT_EQ(m[1], m[2]);  // CPU: peak RSS in both
    } else {
      EXPECT_EQ(line.rfind("step:", 0), std::string::npos) << "malformed step line: " << line;
    }
  }
  EXPECT_EQ(val_losses.size(), 3u);
  EXPECT_EQ(train_lines, 8);
  EXPECT_EQ(mem_lines, 1);

  std::ifstream summary_file(scratch.out() / "e2e.json");
  const nlohmann::json j = nlohmann::json::parse(summary_file);
  EXPECT_EQ(j.at("status"), "finished");
  EXPECT_EQ(j.at("run_id"), "e2e");
  EXPECT_EQ(j.at("seed"), 3);
  EXPECT_EQ(j.at("steps"), 8);
  EXPECT_NEAR(j.at("final_val_loss").get<double>(), val_losses.back(), 5e-5);
  EXPECT_EQ(j.at("val_history").size(), 3u);
  EXPECT_EQ(j.at("environment").at("threads"), 1);
  EXPECT_EQ(j.at("train_data"), (nlohmann::json{{"cycled", false}, {"passes", 1}}));

  // The same seed reproduces the same summary losses exactly.
  const Outcome again = test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "e2e_again"));
  ASSERT_EQ(again.exit_code, 0) << again.stderr_text;
  std::ifstream again_file(scratch.out() / "e2e_again.json");
  const nlohmann::json k = nlohmann::json::parse(again_file);
  EXPECT_EQ(k.at("final_val_loss"), j.at("final_val_loss"));
}

TEST(TrainGptCli, ForcedNanExitsThreeWithSummary) {
  RunScratch scratch;
  const Outcome o = test::run_program(scratch, "standin_train_gpt",
                                      test::short_run_args(scratch, "nan") + " --set debug.inject_nan_step=1");
  EXPECT_EQ(o.exit_code, 3) << o.stderr_text;
  std::ifstream summary_file(scratch.out() / "nan.json");
  const nlohmann::json j = nlohmann::json::parse(summary_file);
  EXPECT_EQ(j.at("status"), "diverged");
  EXPECT_EQ(j.at("steps"), 1);
}

void expect_usage_error(const RunScratch& scratch, const std::string& program, const std::string& args,
                        const std::string& fragment) {
  const Outcome o = test::run_program(scratch, program, args);
  EXPECT_EQ(o.exit_code, 2) << args << "\n" << o.stderr_text;
  EXPECT_NE(o.stderr_text.find(fragment), std::string::npos) << o.stderr_text;
  EXPECT_EQ(std::count(o.stderr_text.begin(), o.stderr_text.end(), '\n'), 1) << "one line: " << o.stderr_text;
}

TEST(TrainGptCli, BadInputExitsTwoWithOneLine) {
  RunScratch scratch;
  const std::string args = test::short_run_args(scratch, "bad");
  expect_usage_error(scratch, "standin_train_gpt", args + " --set model.bogus=1", "bogus");
  expect_usage_error(scratch, "standin_train_gpt", args + " --gpus 4", "--gpus");
  expect_usage_error(scratch, "standin_train_gpt", args + " --set debug.bogus=1", "debug.bogus");
  expect_usage_error(scratch, "standin_train_gpt", args + " --resume " + (scratch.root() / "none.ckpt").string(),
                     "none.ckpt");
  expect_usage_error(scratch, "standin_train_gpt", args + " --frobnicate", "frobnicate");
  expect_usage_error(scratch, "train_gpt", "--recipe tiny --data " + scratch.data().string(), "--seed");
  expect_usage_error(
      scratch, "train_gpt",
      "--recipe nosuch --data " + scratch.data().string() + " --seed 1 --run-id x --out " + scratch.out().string(),
      "nosuch");
  expect_usage_error(scratch, "train_gpt",
                     "--recipe tiny --data /nonexistent_data --seed 1 --run-id x --out " + scratch.out().string(),
                     "/nonexistent_data");
}

// The harness reads a recipe's record target through --print-recipe: only --recipe (and --set) are needed.
TEST(TrainGptCli, PrintRecipeWritesNameHashAndRecordTarget) {
  RunScratch scratch;
  const Outcome o = test::run_program(scratch, "train_gpt", "--print-recipe --recipe head --set record.target=3.5");
  ASSERT_EQ(o.exit_code, 0) << o.stderr_text;
  std::ifstream in(scratch.root() / "stdout.txt");
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc.at("name"), "head");
  EXPECT_EQ(doc.at("hash").get<std::string>().size(), 16u);
  EXPECT_EQ(doc.at("record").at("target").get<double>(), 3.5);
  EXPECT_THAT(doc.at("record").at("source").get<std::string>(), ::testing::HasSubstr("track 1"));
  expect_usage_error(scratch, "train_gpt", "--print-recipe --recipe nosuch", "nosuch");
  expect_usage_error(scratch, "train_gpt", "--print-recipe --recipe head --set target_loss=3", "[record]");
  expect_usage_error(scratch, "train_gpt", "--print-recipe", "--recipe");
}

TEST(TrainGptCli, CorruptShardExitsTwo) {
  RunScratch scratch;
  {
    std::fstream shard(scratch.data() / "train_000000.bin", std::ios::in | std::ios::out | std::ios::binary);
    shard.seekp(0);
    shard.write("XXXX", 4);  // break the magic
  }
  expect_usage_error(scratch, "standin_train_gpt", test::short_run_args(scratch, "corrupt"), "train_000000.bin");
}

// Steps of 32,768 tokens need more than the 200,000-token scratch corpus over the 8 steps (with room in
// cu_seqlens for the synthetic corpus's short documents; no warmup, to halve the time).
std::string exhausting_args(const RunScratch& scratch, const std::string& run_id) {
  std::string args =
      test::short_run_args(scratch, run_id) + " --set schedule.cu_rows_multiplier=8 --set schedule.warmup=false";
  for (int stage = 0; stage < 4; ++stage) {
    args += " --set schedule.stages." + std::to_string(stage) + ".batch_tokens=32768";
  }
  return args;
}

TEST(TrainGptCli, CycledTrainShardsAreCountedInLogAndSummary) {
  RunScratch scratch;
  const Outcome stopped = test::run_program(scratch, "standin_train_gpt", exhausting_args(scratch, "once"));
  EXPECT_NE(stopped.exit_code, 0);
  EXPECT_THAT(stopped.stderr_text, ::testing::HasSubstr("training data exhausted"));

  const Outcome o = test::run_program(scratch, "standin_train_gpt",
                                      exhausting_args(scratch, "cycled") + " --set data.cycle_train_shards=true");
  ASSERT_EQ(o.exit_code, 0) << o.stderr_text;
  std::ifstream summary_file(scratch.out() / "cycled.json");
  const nlohmann::json j = nlohmann::json::parse(summary_file);
  EXPECT_EQ(j.at("status"), "finished");
  EXPECT_EQ(j.at("train_data").at("cycled"), true);
  // 8 × 32,768 tokens plus the remainders that BOS alignment discards: two or three passes over 200,000 tokens.
  const int64_t passes = j.at("train_data").at("passes").get<int64_t>();
  EXPECT_GE(passes, 2);
  EXPECT_LE(passes, 3);
  std::ifstream log_file(scratch.out() / "cycled.txt");
  const std::string log((std::istreambuf_iterator<char>(log_file)), {});
  EXPECT_THAT(log, ::testing::HasSubstr("cycled when they run out"));
  EXPECT_THAT(log, ::testing::HasSubstr("train data passes: " + std::to_string(passes) + "\n"));
}

}  // namespace
}  // namespace gpt
