// train_gpt and tokenize on bad input found by probing (issue: fuzzing and bad-input defects): a run log that cannot
// be written, corpus shards without documents, FIFOs in place of files, a folder given to `tokenize shards`.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_test_util.h"
#include "trainer/data/shard.h"

namespace gpt {
namespace {

using test::Outcome;
using test::RunScratch;

TEST(BadInputCli, RunLogOnAFullDiskFailsNamingTheLog) {
  RunScratch scratch;
  std::filesystem::create_directories(scratch.out());
  std::filesystem::create_symlink("/dev/full", scratch.out() / "full.txt");
  const Outcome o = test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "full"));
  EXPECT_EQ(o.exit_code, 1) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find((scratch.out() / "full.txt").string()), std::string::npos) << o.stderr_text;
  // The summary still records the failure.
  std::ifstream summary_file(scratch.out() / "full.json");
  ASSERT_TRUE(summary_file.good());
  EXPECT_EQ(nlohmann::json::parse(summary_file).at("status"), "failed");
}

TEST(BadInputCli, TrainShardWithoutBosFailsAtStartUp) {
  RunScratch scratch;
  write_shard(scratch.data() / "train_000001.bin", std::vector<std::uint16_t>(5000, 17));
  const Outcome o = test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "nobos"));
  EXPECT_EQ(o.exit_code, 2) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("train_000001.bin"), std::string::npos) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("no BOS"), std::string::npos) << o.stderr_text;
}

TEST(BadInputCli, EmptyTrainShardFailsAtStartUp) {
  RunScratch scratch;
  write_shard(scratch.data() / "train_000001.bin", std::vector<std::uint16_t>{});
  const Outcome o = test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "empty"));
  EXPECT_EQ(o.exit_code, 2) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("train_000001.bin: holds 0 tokens"), std::string::npos) << o.stderr_text;
}

TEST(BadInputCli, ValShardWithoutBosIsRejected) {
  RunScratch scratch;
  for (const auto& entry : std::filesystem::directory_iterator(scratch.data())) {
    if (entry.path().filename().string().rfind("val_", 0) == 0) std::filesystem::remove(entry.path());
  }
  write_shard(scratch.data() / "val_000000.bin", std::vector<std::uint16_t>(40000, 17));
  const Outcome o = test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "valnobos"));
  EXPECT_EQ(o.exit_code, 2) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("val_000000.bin"), std::string::npos) << o.stderr_text;
}

TEST(BadInputCli, FifoShardOrRecipeIsRejectedWithoutBlocking) {
  RunScratch scratch;
  ASSERT_EQ(::mkfifo((scratch.data() / "train_000009.bin").c_str(), 0600), 0);
  Outcome o = test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "fifo"));
  EXPECT_EQ(o.exit_code, 2) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("train_000009.bin: not a regular file"), std::string::npos) << o.stderr_text;

  std::filesystem::remove(scratch.data() / "train_000009.bin");
  const auto recipe_fifo = scratch.root() / "recipe.toml";
  ASSERT_EQ(::mkfifo(recipe_fifo.c_str(), 0600), 0);
  std::string args = test::short_run_args(scratch, "fifo2");
  args.replace(args.find("--recipe tiny"), 13, "--recipe " + recipe_fifo.string());
  o = test::run_program(scratch, "standin_train_gpt", args);
  EXPECT_EQ(o.exit_code, 2) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("not a regular file"), std::string::npos) << o.stderr_text;
}

TEST(BadInputCli, TokenizeShardsOnAFolderSaysSo) {
  RunScratch scratch;
  const Outcome o = test::run_program(
      scratch, "tokenize", "shards " + scratch.data().string() + " --out " + (scratch.root() / "tok").string());
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.stderr_text.find("is a directory"), std::string::npos) << o.stderr_text;
  EXPECT_EQ(o.stderr_text.find("underflow"), std::string::npos) << o.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(scratch.root() / "tok" / "report.json"));
}

}  // namespace
}  // namespace gpt
