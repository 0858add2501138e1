// Imported runs are grouped into arms by what they ran (step count, code dump, recipe hash), not by folder alone.
#include <gtest/gtest.h>

#include "harness/logparse/experiment.h"

namespace gpt::harness {
namespace {

TEST(LogCodeHash, HashesTheCodeBeforeTheFirstSeparator) {
  const std::string code = "import torch\nprint('hi')\n";
  const std::string log = code + "=====\nRunning Python 3.12\n=====\nstep:0/10 val_loss:10.8 train_time:0ms\n";
  EXPECT_EQ(log_code_hash(log), sha1_hex(code));
  EXPECT_EQ(log_code_hash(log).size(), 40u);
  // Other code, other hash; the output after the separator (dates, GPU memory) does not count.
  EXPECT_NE(log_code_hash("import jax\n=====\n"), log_code_hash(log));
  EXPECT_EQ(log_code_hash(code + "=====\nother output\n"), log_code_hash(log));
  // No code dump: step lines first, no separator, or nothing before it.
  EXPECT_EQ(log_code_hash("step:0/10 val_loss:10.8 train_time:0ms\n=====\n"), "");
  EXPECT_EQ(log_code_hash("just text\n"), "");
  EXPECT_EQ(log_code_hash("=====\nstep:0/10 val_loss:10.8 train_time:0ms\n"), "");
}

// A record folder with 10 record logs of 1705 steps and 10 comparison logs of 1670: two arms, and a note.
TEST(ExperimentArms, AFolderMixingStepCountsIsSplitAndSaysSo) {
  std::vector<ExperimentKey> keys;
  for (int i = 0; i < 20; ++i) keys.push_back({"2025-09-05_SkipMLPBlocks", i < 10 ? 1705 : 1670, "", ""});
  keys.push_back({"other", 1705, "", ""});
  const ExperimentArms arms = experiment_arms(keys);
  EXPECT_EQ(arms.arms[0], "2025-09-05_SkipMLPBlocks [1705 steps]");
  EXPECT_EQ(arms.arms[19], "2025-09-05_SkipMLPBlocks [1670 steps]");
  EXPECT_EQ(arms.arms[20], "other");  // a folder of one experiment keeps its name
  ASSERT_EQ(arms.notes.size(), 1u);
  EXPECT_NE(arms.notes[0].find("'2025-09-05_SkipMLPBlocks' mixes 2 experiments (different step counts)"),
            std::string::npos)
      << arms.notes[0];
  EXPECT_NE(arms.notes[0].find("\"2025-09-05_SkipMLPBlocks [1670 steps]\" (10 run(s))"), std::string::npos)
      << arms.notes[0];
}

TEST(ExperimentArms, SameStepsButOtherCodeOrRecipeAreOtherExperiments) {
  const std::string a(40, 'a'), b(40, 'b');
  const ExperimentArms code = experiment_arms({{"x", 10, a, ""}, {"x", 10, b, ""}, {"x", 10, a, ""}});
  EXPECT_EQ(code.arms[0], "x [code aaaaaaa]");
  EXPECT_EQ(code.arms[1], "x [code bbbbbbb]");
  EXPECT_EQ(code.arms[2], code.arms[0]);
  const ExperimentArms recipe = experiment_arms({{"y", 10, "", "r1r1r1r1r1"}, {"y", 10, "", "r2r2r2r2r2"}});
  EXPECT_EQ(recipe.arms[0], "y [recipe r1r1r1r1]");
  const ExperimentArms same = experiment_arms({{"z", 10, a, ""}, {"z", 10, a, ""}});
  EXPECT_EQ(same.arms, (std::vector<std::string>{"z", "z"}));
  EXPECT_TRUE(same.notes.empty());
}

}  // namespace
}  // namespace gpt::harness
