// train_gpt and tokenize as a careless user or an attacker drives them: another corpus, a FIFO or a malformed file
// given to --resume, a planted link at the run log, values too small or too large, each one clear error.
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "run_test_util.h"
#include "base/fnv1a.h"
#include "source_dir.h"
#include "trainer/data/synthetic.h"

namespace gpt {
namespace {

using test::Outcome;
using test::RunScratch;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// --resume opens its file for reading: on a FIFO that waited for a writer forever (as recipes and shards no longer do).
TEST(ReliabilityCli, ResumeOnAFifoIsRefusedWithoutBlocking) {
  RunScratch scratch;
  const auto fifo = scratch.root() / "f.ckpt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Outcome o =
      test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "r") + " --resume " + fifo.string(),
                        /*limit_seconds=*/30);
  EXPECT_EQ(o.exit_code, 2) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("not a regular file"), std::string::npos) << o.stderr_text;
}

TEST(ReliabilityCli, ResumeOnAnotherCorpusIsRefusedNamingBoth) {
  RunScratch scratch;
  Outcome o =
      test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "base") + " --checkpoint-every 4");
  ASSERT_EQ(o.exit_code, 0) << o.stderr_text;
  SyntheticCorpusOptions other;
  other.seed = 99;
  other.train_tokens = 150'000;
  other.val_tokens = 20'000;
  const auto other_dir = scratch.root() / "other-data";
  write_synthetic_corpus(other_dir, other);
  std::string args = test::short_run_args(scratch, "other");
  args.replace(args.find(scratch.data().string()), scratch.data().string().size(), other_dir.string());
  o = test::run_program(scratch, "standin_train_gpt",
                        args + " --resume " + (scratch.out() / "base.step000004.ckpt").string());
  EXPECT_EQ(o.exit_code, 2) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("trained on '" + scratch.data().string() + "'"), std::string::npos) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("--data is '" + other_dir.string() + "'"), std::string::npos) << o.stderr_text;
}

// The checkpoint fuzzer's finding: one-byte elements, dims [648518346341353480, 16, 0].
TEST(ReliabilityCli, ResumeCheckpointWithAnOverflowingShapeIsRefused) {
  RunScratch scratch;
  const std::string corpus = read_text(std::filesystem::path(SPEEDRUN_SOURCE_DIR) / "tests" / "fuzz" / "corpus" /
                                       "checkpoint" / "regress_zero_extent_overflow.bin");
  std::string bytes = corpus.substr(1);  // the fuzz input's first byte asks for the checksum to be appended
  const std::uint64_t h = fnv1a64(bytes);
  bytes.append(reinterpret_cast<const char*>(&h), sizeof h);
  const auto ckpt = scratch.root() / "overflow.ckpt";
  std::ofstream(ckpt, std::ios::binary) << bytes;
  const Outcome o = test::run_program(scratch, "standin_train_gpt",
                                      test::short_run_args(scratch, "o") + " --resume " + ckpt.string());
  EXPECT_EQ(o.exit_code, 2) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("more than 2^63 bytes or elements"), std::string::npos) << o.stderr_text;
}

TEST(ReliabilityCli, PlantedLinkAtTheRunLogIsNotWrittenThrough) {
  RunScratch scratch;
  std::filesystem::create_directories(scratch.out());
  const auto victim = scratch.root() / "victim.txt";
  std::ofstream(victim) << "keep";
  std::filesystem::create_symlink(victim, scratch.out() / "l.txt");
  const Outcome o = test::run_program(scratch, "standin_train_gpt", test::short_run_args(scratch, "l"));
  EXPECT_NE(o.exit_code, 0) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("symbolic link"), std::string::npos) << o.stderr_text;
  EXPECT_EQ(read_text(victim), "keep");
}

// 1e400 is refused as out of range; 1e-400 became 0 without a word.
TEST(ReliabilityCli, SetValueTooSmallForADoubleIsRefused) {
  RunScratch scratch;
  const Outcome o = test::run_program(scratch, "standin_train_gpt",
                                      test::short_run_args(scratch, "u") + " --set optimizer.adam_lr=1e-400");
  EXPECT_EQ(o.exit_code, 2) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("'1e-400' is too small"), std::string::npos) << o.stderr_text;
}

// A 5 MB `inherits` name made a 15 MB error message. A recipe is now at most 1 MiB, so the name is 1 MB: the
// longest a recipe can hold, which still reaches the `inherits` lookup.
TEST(ReliabilityCli, HugeInheritsNameIsAShortError) {
  RunScratch scratch;
  const auto recipe = scratch.root() / "big.toml";
  std::ofstream(recipe) << "inherits = \"" << std::string(1'000'000, 'a') << "\"\n";
  std::string args = test::short_run_args(scratch, "h");
  args.replace(args.find("--recipe tiny"), 13, "--recipe " + recipe.string());
  const Outcome o = test::run_program(scratch, "standin_train_gpt", args);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.stderr_text.find("inherits"), std::string::npos) << o.stderr_text.substr(0, 300);
  EXPECT_LT(o.stderr_text.size(), 400u) << o.stderr_text.substr(0, 300);
}

// A negative value is one short line: the range CLI11 printed ended in DBL_MAX written out in 310 digits.
TEST(ReliabilityCli, NegativeShuffleSeedIsAShortError) {
  RunScratch scratch;
  const std::string args =
      "shards " + scratch.data().string() + " --out " + (scratch.root() / "tok").string() + " --shuffle-seed -1";
  const Outcome o = test::run_program(scratch, "tokenize", args);
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.stderr_text.find("--shuffle-seed"), std::string::npos) << o.stderr_text;
  EXPECT_LT(o.stderr_text.size(), 200u) << o.stderr_text;
}

}  // namespace
}  // namespace gpt
