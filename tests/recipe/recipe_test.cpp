// Recipe files, inheritance, --set overrides, errors and the recipe hash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "tests/common/error_of.h"
#include "base/check.h"
#include "trainer/recipe/recipe.h"

namespace gpt {
namespace {

using test::error_of;
using ::testing::HasSubstr;

TEST(Recipe, HeadMatchesReference) {
  const Recipe r = load_recipe("head");
  EXPECT_EQ(r.name, "head");
  EXPECT_EQ(r.model.model_dim, 768);
  EXPECT_EQ(r.model.vocab_size, 50304);
  EXPECT_EQ(r.model.bigram_rows, 377280);
  EXPECT_DOUBLE_EQ(r.model.init_bound, 1.0 / 32);
  EXPECT_DOUBLE_EQ(r.model.init_bound, std::sqrt(3.0) * 0.5 / std::sqrt(768.0));
  ASSERT_EQ(r.schedule.stages.size(), 4u);
  EXPECT_EQ(r.schedule.stages[2].batch_tokens, 393216);
  EXPECT_DOUBLE_EQ(r.schedule.stages[1].lr_mul, 1.52);
  EXPECT_EQ(r.slices_per_call, 8);
  EXPECT_TRUE(r.fp8);
  EXPECT_DOUBLE_EQ(r.record.target, 3.28);
  EXPECT_NE(r.record.source.find("track 1"), std::string::npos) << r.record.source;
  EXPECT_DOUBLE_EQ(r.optimizer.bank_lr, 0.023);
  EXPECT_DOUBLE_EQ(r.optimizer.adam_lr, 0.008);
  EXPECT_EQ(r.optimizer.adam.size(), 16u);
  const AdamGroupConfig& lm = r.optimizer.adam.at("lm_head");
  EXPECT_DOUBLE_EQ(lm.beta1, 0.5);
  EXPECT_DOUBLE_EQ(lm.wd_mul, 150);
  EXPECT_TRUE(lm.sharded);
  EXPECT_FALSE(r.optimizer.adam.at("_mudd_gate_scale").sharded);
  EXPECT_DOUBLE_EQ(r.optimizer.adam.at("bigram_embed").lr_mul, 75);
  EXPECT_DOUBLE_EQ(r.optimizer.banks.at("mlp_bank").odd_matrix_lr_mul, 2);
  EXPECT_EQ(r.validation.tokens, 10'485'760);
}

TEST(Recipe, TinyInheritsAndOverrides) {
  const Recipe r = load_recipe("tiny");
  EXPECT_EQ(r.name, "tiny");
  EXPECT_EQ(r.model.model_dim, 96);
  EXPECT_EQ(r.model.head_dim, 16);
  EXPECT_EQ(r.model.vocab_size, 50304);  // inherited
  EXPECT_EQ(r.model.bigram_rows, 50304);
  EXPECT_NEAR(r.model.init_bound, std::sqrt(3.0) * 0.5 / std::sqrt(96.0), 1e-16);
  EXPECT_EQ(r.schedule.stages[0].batch_tokens, 512);
  EXPECT_DOUBLE_EQ(r.schedule.stages[1].lr_mul, 1.52);  // inherited element-wise
  EXPECT_EQ(r.schedule.stages[0].mtp_start.size(), 3u);
  EXPECT_FALSE(r.fp8);
  EXPECT_EQ(r.slices_per_call, 1);
}

TEST(Recipe, Track1IsHead) {
  const Recipe head = load_recipe("head"), track1 = load_recipe("track1");
  EXPECT_EQ(track1.name, "track1");
  EXPECT_EQ(track1.canonical(), head.canonical());
  EXPECT_EQ(track1.hash(), head.hash());
}

TEST(Recipe, HashIsStableAndSensitive) {
  const Recipe a = load_recipe("head"), b = load_recipe("head");
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.hash().size(), 16u);
  EXPECT_NE(a.hash(), load_recipe("tiny").hash());
  EXPECT_NE(a.hash(), load_recipe("head", {"optimizer.adam_eps=1e-9"}).hash());
  // Writing the same value explicitly resolves to the same configuration.
  EXPECT_EQ(a.hash(), load_recipe("head", {"record.target=3.28"}).hash());
  // The source of the target is prose, not configuration.
  EXPECT_EQ(a.hash(), load_recipe("head", {"record.source=\"elsewhere\""}).hash());
}

// The sign of a zero is no configuration: -0.0 and 0.0 give one hash, in a scalar key and in a list.
TEST(Recipe, NegativeZeroHashesAsZero) {
  EXPECT_EQ(load_recipe("head", {"schedule.lr_floor=-0.0"}).hash(),
            load_recipe("head", {"schedule.lr_floor=0.0"}).hash());
  EXPECT_EQ(load_recipe("head", {"schedule.stages.0.mtp_end=[1.0, 0.5, -0.0]"}).hash(), load_recipe("head").hash());
  EXPECT_NE(load_recipe("head", {"schedule.lr_floor=0.0"}).hash(), load_recipe("head").hash());
}

TEST(Recipe, Overrides) {
  const Recipe r =
      load_recipe("head", {"schedule.stages.1.lmax=1024", "optimizer.adam.lm_head.beta1=0.6", "record.target=3",
                           "fp8=false", "schedule.stage_durations=[1, 2, 1]", "validation.every=0"});
  EXPECT_EQ(r.schedule.stages[1].lmax, 1024);
  EXPECT_EQ(r.schedule.stages[0].lmax, 896);
  EXPECT_DOUBLE_EQ(r.optimizer.adam.at("lm_head").beta1, 0.6);
  EXPECT_DOUBLE_EQ(r.record.target, 3.0);  // an integer is accepted where a number is expected
  EXPECT_FALSE(r.fp8);
  EXPECT_EQ(r.schedule.stage_durations, (std::vector<double>{1, 2, 1}));
  EXPECT_EQ(r.validation.every, 0);
}

// 1e400 is refused as out of range; 1e-400 used to become 0 without a word.
TEST(Recipe, OverrideTooSmallForADoubleIsRefused) {
  const std::string msg = error_of([] { load_recipe("head", {"optimizer.adam.lm_head.beta1=1e-400"}); });
  EXPECT_NE(msg.find("--set optimizer.adam.lm_head.beta1: value '1e-400' is too small"), std::string::npos) << msg;
  const Recipe zero = load_recipe("head", {"optimizer.adam.lm_head.beta1=0.0e-400"});  // a zero stays allowed
  EXPECT_DOUBLE_EQ(zero.optimizer.adam.at("lm_head").beta1, 0.0);
}

// A 5 MB `inherits` name made a 15 MB error message (the name quoted three times). Such a recipe is now refused by
// its size before parsing; a name just within the size limit is still quoted short.
TEST(Recipe, HugeInheritsNameIsAShortError) {
  const std::string text = "inherits = \"" + std::string(1'000'000, 'a') + "\"\n";
  const std::string msg = error_of([&] { parse_recipe(text, "big.toml"); });
  EXPECT_NE(msg.find("inherits"), std::string::npos) << msg.substr(0, 300);
  EXPECT_LT(msg.size(), 400u) << msg.substr(0, 300);
}

// Found by recipe_fuzz (600 s run): toml++ reads an integer beyond 2^53 as no double at all, and the reader's
// .value() threw std::bad_optional_access instead of an error naming the key.
TEST(Recipe, IntegerBeyondADoublesExactRangeIsNamed) {
  const std::string msg =
      error_of([] { parse_recipe("inherits = \"head\"\n[optimizer]\nadam_lr = 9007199254740993\n", "big.toml"); });
  EXPECT_NE(msg.find("adam_lr' holds the integer 9007199254740993"), std::string::npos) << msg;
}

TEST(Recipe, OverrideErrorsNameTheKey) {
  std::string msg = error_of([] { load_recipe("head", {"model.foo=1"}); });
  EXPECT_NE(msg.find("model.foo"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key"), std::string::npos) << msg;

  msg = error_of([] { load_recipe("head", {"model.model_dim=1.5"}); });
  EXPECT_NE(msg.find("model.model_dim"), std::string::npos) << msg;
  EXPECT_NE(msg.find("integer"), std::string::npos) << msg;

  msg = error_of([] { load_recipe("head", {"model.model_dim=abc"}); });
  EXPECT_NE(msg.find("model.model_dim"), std::string::npos) << msg;

  msg = error_of([] { load_recipe("head", {"schedule.momentum_max=1.5"}); });
  EXPECT_NE(msg.find("schedule.momentum_max"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, 1)"), std::string::npos) << msg;

  msg = error_of([] { load_recipe("head", {"schedule.stages.7.lmax=3"}); });
  EXPECT_NE(msg.find("[0, 4)"), std::string::npos) << msg;

  msg = error_of([] { load_recipe("head", {"model.vocab_size=0"}); });
  EXPECT_NE(msg.find("model.vocab_size"), std::string::npos) << msg;

  msg = error_of([] { load_recipe("head", {"fp8=1"}); });
  EXPECT_NE(msg.find("boolean"), std::string::npos) << msg;

  msg = error_of([] { load_recipe("head", {"no_equals_sign"}); });
  EXPECT_NE(msg.find("key=value"), std::string::npos) << msg;

  msg = error_of([] { load_recipe("head", {"model=3"}); });
  EXPECT_NE(msg.find("table"), std::string::npos) << msg;

  msg = error_of([] { load_recipe("head", {"schedule.stages.0.mtp_start=[1.0]"}); });
  EXPECT_NE(msg.find("mtp_start"), std::string::npos) << msg;  // lengths of start/end lists differ
}

TEST(Recipe, FileErrors) {
  std::string msg = error_of([] { load_recipe("no_such_recipe"); });
  EXPECT_NE(msg.find("no_such_recipe"), std::string::npos) << msg;

  msg = error_of([] { parse_recipe("inherits = \"tiny\"\n[model]\nwidth = 3\n", "bad.toml"); });
  EXPECT_NE(msg.find("unknown key 'model.width'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bad.toml"), std::string::npos) << msg;

  msg = error_of([] { parse_recipe("[model]\nmodel_dim = 3\n", "partial.toml"); });
  EXPECT_NE(msg.find("missing key"), std::string::npos) << msg;

  msg = error_of([] { parse_recipe("inherits = \"head\"\n[model\n", "broken.toml"); });
  EXPECT_NE(msg.find("syntax error at line 2"), std::string::npos) << msg;

  msg = error_of([] { parse_recipe("inherits = \"head\"\nslices_per_call = 3\n", "odd.toml"); });
  EXPECT_NE(msg.find("slices_per_call"), std::string::npos) << msg;
}

// [record] replaced the top-level target_loss; the old key is refused with the new spelling, and the hash of a
// recipe whose target did not change is the one it had before (tiny's, measured from a run log of that time).
TEST(Recipe, RecordTableHoldsTheTargetAndKeepsOldHashes) {
  EXPECT_EQ(load_recipe("tiny", {"record.target=3.28"}).hash(), "031371deb4ac1937");
  EXPECT_EQ(load_recipe("track1").record.target, 3.28);
  EXPECT_EQ(load_recipe("mini").record.target, 3.28);
  EXPECT_NE(load_recipe("mini").record.source.find("no measured mini baseline"), std::string::npos);
  const Recipe tiny = load_recipe("tiny");
  EXPECT_LT(tiny.record.target, 10.0);
  EXPECT_GT(tiny.record.target, 3.28);
  EXPECT_NE(tiny.record.source.find("baselines/tiny.toml"), std::string::npos) << tiny.record.source;
  EXPECT_THAT(error_of([] { load_recipe("head", {"target_loss=3.3"}); }),
              HasSubstr("'target_loss' moved to the [record] table; use --set record.target=3.3"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"head\"\ntarget_loss = 3.3\n", "old.toml"); }),
              HasSubstr("old.toml: 'target_loss' moved to the [record] table"));
  EXPECT_THAT(error_of([] { load_recipe("head", {"record.source=\"\""}); }), HasSubstr("record.source"));
  EXPECT_THAT(error_of([] { load_recipe("head", {"record.target=-1"}); }), HasSubstr("record.target"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"head\"\n[record]\ngoal = 3\n", "typo.toml"); }),
              HasSubstr("unknown key 'record.goal'"));
}

TEST(Recipe, ParseFromTextWithInheritance) {
  const Recipe r = parse_recipe("inherits = \"tiny\"\n[schedule]\nnum_extension = 4\n", "custom.toml");
  EXPECT_EQ(r.name, "custom");
  EXPECT_EQ(r.schedule.num_extension, 4);
  EXPECT_EQ(r.model.model_dim, 96);
}

TEST(Recipe, CycleTrainShardsIsOffByDefaultAndKeepsOldHashes) {
  const Recipe tiny = load_recipe("tiny");
  EXPECT_FALSE(tiny.data.cycle_train_shards);
  // A recipe file without a [data] table (as written before it existed) resolves to the same configuration.
  const Recipe without_table = parse_recipe("inherits = \"head\"\n", "old.toml");
  const Recipe head = load_recipe("head");
  EXPECT_EQ(head.canonical().find("cycle_train_shards"), std::string::npos);
  EXPECT_EQ(without_table.hash(), head.hash());

  const Recipe cycled = load_recipe("tiny", {"data.cycle_train_shards=true"});
  EXPECT_TRUE(cycled.data.cycle_train_shards);
  EXPECT_NE(cycled.canonical().find("cycle_train_shards = true"), std::string::npos);
  EXPECT_NE(cycled.hash(), tiny.hash());
  EXPECT_THAT(error_of([] { load_recipe("tiny", {"data.cycle_train_shards=1"}); }), HasSubstr("expected a boolean"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"tiny\"\n[data]\ncycle = true\n", "typo.toml"); }),
              HasSubstr("unknown key 'data.cycle'"));
}

}  // namespace
}  // namespace gpt
