// Recipe values that crashed or overflowed the trainer, or gave bare library messages (issue: fuzzing and bad-input
// defects): every size and count has a range that the error names, tables for unknown parameters are rejected, and
// `inherits` resolves beside the including recipe.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "tests/common/error_of.h"
#include "base/check.h"
#include "trainer/recipe/recipe.h"
#include "trainer/schedule/schedule.h"

namespace gpt {
namespace {

using test::error_of;

// Loads `tiny` with one override and expects an error naming `key`.
void expect_rejected(const std::string& assignment, const std::string& key) {
  const std::string msg = error_of([&] {
    const Recipe r = load_recipe("tiny", {assignment});
    const Schedule s(r);  // reached only when the recipe accepts the value
    (void)s.at(s.total_steps());
  });
  EXPECT_NE(msg.find(key), std::string::npos) << assignment << " -> '" << msg << "'";
}

TEST(RecipeLimits, HugeSizesAndCountsNameTheirKey) {
  expect_rejected("model.num_heads=4611686018427387910", "model.num_heads");
  expect_rejected("schedule.num_scheduled=9223372036854775807", "schedule.num_scheduled");
  expect_rejected("schedule.num_extension=9223372036854775807", "schedule.num_extension");
  expect_rejected("schedule.stages.0.ws_long=4611686018427387904", "schedule.stages.0.ws_long");
  expect_rejected("schedule.window_block=4611686018427387904", "schedule.window_block");
  expect_rejected("schedule.stages.0.lmax=9223372036854775807", "schedule.stages.0.lmax");
  expect_rejected("validation.tokens=1000000000000000000", "validation.tokens");
  expect_rejected("model.vocab_size=1099511627776", "model.vocab_size");
  expect_rejected("schedule.stages.0.batch_tokens=1099511627776", "schedule.stages.0.batch_tokens");
  expect_rejected("validation.cu_rows=9223372036854775807", "validation.cu_rows");
  expect_rejected("model.mudd_hidden=9223372036854775807", "model.mudd_hidden");
  expect_rejected("model.bigram_rows=1099511627776", "model.bigram_rows");
  expect_rejected("schedule.momentum_warmup_steps=9223372036854775807", "schedule.momentum_warmup_steps");
  expect_rejected("schedule.final_ws_long=9223372036854775807", "schedule.final_ws_long");
  expect_rejected("validation.every=9223372036854775807", "validation.every");
}

TEST(RecipeLimits, ProductsAreCheckedWithoutOverflow) {
  // Each factor within its own range, the matrix too large: the error names both keys.
  const std::string msg = error_of([] { load_recipe("head", {"model.bigram_rows=16777216"}); });
  EXPECT_NE(msg.find("model.bigram_rows × model.model_dim"), std::string::npos) << msg;
}

TEST(RecipeLimits, ShippedRecipesStayWithinTheLimits) {
  for (const char* name : {"head", "tiny", "mini", "track1"}) EXPECT_NO_THROW(Schedule(load_recipe(name))) << name;
}

TEST(RecipeLimits, UnknownOptimizerTablesAreRejected) {
  std::string msg = error_of([] {
    parse_recipe(
        "inherits = \"tiny\"\n[optimizer.adam.lm_haed]\nbeta1 = 0.5\nbeta2 = 0.95\nlr_mul = 1.0\n"
        "wd_mul = 1.0\nsharded = true\n",
        "typo.toml");
  });
  EXPECT_NE(msg.find("optimizer.adam.lm_haed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lm_head"), std::string::npos) << msg;  // lists the known names
  msg = error_of(
      [] { parse_recipe("inherits = \"tiny\"\n[optimizer.banks.qk_bnak]\nodd_matrix_lr_mul = 1.0\n", "typo.toml"); });
  EXPECT_NE(msg.find("optimizer.banks.qk_bnak"), std::string::npos) << msg;
}

// A value out of range that came from --set names the flag and its assignment, not the recipe file.
TEST(RecipeLimits, SetRangeErrorsNameTheSetFlag) {
  std::string msg = error_of([] { load_recipe("tiny", {"model.num_heads=0"}); });
  EXPECT_NE(msg.find("--set model.num_heads=0: key 'model.num_heads' must be an integer in [1, "), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("recipe "), std::string::npos) << msg;
  msg = error_of([] { load_recipe("tiny", {"schedule.stages.0.mtp_start=[1.0, -2.0, 0.5]"}); });
  EXPECT_NE(msg.find("--set schedule.stages.0.mtp_start=[1.0, -2.0, 0.5]: key 'schedule.stages.0.mtp_start' entries"),
            std::string::npos)
      << msg;
  msg = error_of([] { load_recipe("tiny", {"optimizer.adam.lm_head.beta1=1.5"}); });
  EXPECT_NE(msg.find("--set optimizer.adam.lm_head.beta1=1.5: key"), std::string::npos) << msg;
  // A key the --set did not touch is still blamed on the file.
  msg = error_of([] { parse_recipe("inherits = \"tiny\"\n[model]\nnum_heads = 0\n", "mine.toml", {"fp8=true"}); });
  EXPECT_NE(msg.find("recipe mine.toml: key 'model.num_heads'"), std::string::npos) << msg;
}

// A recipe with a 10M-entry array is refused by its size before it is parsed (parsing it cost 1.7 GB and 34 s).
TEST(RecipeLimits, OversizedRecipeIsRefusedBeforeParsing) {
  std::string huge = "inherits = \"tiny\"\n[schedule]\nstage_durations = [";
  for (int i = 0; i < 10'000'000; ++i) huge += "1,";
  huge += "1]\n";
  const auto start = std::chrono::steady_clock::now();
  std::string msg = error_of([&] { parse_recipe(huge, "huge.toml"); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  const std::string refusal = " is " + std::to_string(huge.size()) + " bytes; a recipe may hold at most 1048576 bytes";
  EXPECT_NE(msg.find("recipe huge.toml" + refusal), std::string::npos) << msg.substr(0, 300);
  const auto path = std::filesystem::temp_directory_path() / ("huge_recipe_" + std::to_string(::getpid()) + ".toml");
  std::ofstream(path) << huge;
  msg = error_of([&] { load_recipe(path.string()); });
  std::filesystem::remove(path);
  EXPECT_NE(msg.find(path.string() + refusal), std::string::npos) << msg.substr(0, 300);
}

class RecipeFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("recipe_folder_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_ / "sub");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& leaf, const std::string& text) { std::ofstream(dir_ / leaf) << text; }
  std::filesystem::path dir_;
};

TEST_F(RecipeFolder, InheritsAShippedRecipeFromElsewhere) {
  write("mine.toml", "inherits = \"tiny\"\n[schedule]\nnum_extension = 3\n");
  const Recipe r = load_recipe((dir_ / "mine.toml").string());
  EXPECT_EQ(r.schedule.num_extension, 3);
  EXPECT_EQ(r.model.model_dim, 96);
}

TEST_F(RecipeFolder, InheritsResolveBesideTheIncludingRecipe) {
  write("sub/base.toml", "inherits = \"tiny\"\n[model]\nmudd_hidden = 8\n");
  write("sub/child.toml", "inherits = \"base\"\n[schedule]\nnum_extension = 5\n");
  write("top.toml", "inherits = \"sub/child.toml\"\nfp8 = true\n");
  const Recipe r = load_recipe((dir_ / "top.toml").string());  // from whatever the working folder is
  EXPECT_EQ(r.model.mudd_hidden, 8);
  EXPECT_EQ(r.schedule.num_extension, 5);
  EXPECT_TRUE(r.fp8);
}

TEST_F(RecipeFolder, MissingParentNamesWhereItLooked) {
  write("orphan.toml", "inherits = \"no_such_base\"\n");
  const std::string msg = error_of([&] { load_recipe((dir_ / "orphan.toml").string()); });
  EXPECT_NE(msg.find((dir_ / "no_such_base.toml").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find((default_recipe_dir() / "no_such_base.toml").string()), std::string::npos) << msg;
}

TEST_F(RecipeFolder, FifoRecipeIsRejectedBeforeOpening) {
  const auto fifo = dir_ / "fifo.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string msg = error_of([&] { load_recipe(fifo.string()); });
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  write("uses_fifo.toml", "inherits = \"fifo.toml\"\n");
  msg = error_of([&] { load_recipe((dir_ / "uses_fifo.toml").string()); });
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
}

}  // namespace
}  // namespace gpt
