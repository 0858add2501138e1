// The §S profile's recipe keys (RECIPE §S, §R.2): the [extensions] table, the §S.1/§S.4 stage and schedule keys, the
// ext / mini-ext / tiny-ext recipes (RECIPE's seed / mini-seed / tiny-seed), --set overrides, errors, and the hashes
// of the recipes written before §S.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "tests/common/error_of.h"
#include "trainer/recipe/recipe.h"

namespace gpt {
namespace {

using test::error_of;
using ::testing::HasSubstr;

// Hashes of the shipped recipes as printed by `train_gpt --recipe NAME --print-recipe` before the §S keys were
// parsed: adding optional keys must leave every existing configuration's identity unchanged.
TEST(ExtensionsRecipe, OlderRecipesKeepTheirHashes) {
  EXPECT_EQ(load_recipe("head").hash(), "37bd9baf96ce2997");
  EXPECT_EQ(load_recipe("track1").hash(), "37bd9baf96ce2997");
  EXPECT_EQ(load_recipe("mini").hash(), "0e62c7b087efd987");
  EXPECT_EQ(load_recipe("tiny").hash(), "1ab04ba154357d91");
  const std::string text = load_recipe("head").canonical();
  for (const char* key : {"seed", "extensions", "growth", "segment_cap", "prefix_steps", "sampled_softmax"}) {
    EXPECT_EQ(text.find(key), std::string::npos) << key;
  }
  // Writing §S keys at their defaults resolves to the same configuration.
  const Recipe explicit_defaults = parse_recipe(
      "inherits = \"head\"\n[schedule]\ngrowth_steps = 0\ngrowth_stage = 2\nsegment_cap = 0\n"
      "[extensions]\nbank_opt = \"normuon\"\ncanonical_mask = \"off\"\nngram_rows = 0\nlog_every = 1\n",
      "defaults.toml");
  EXPECT_EQ(explicit_defaults.hash(), "37bd9baf96ce2997");
}

TEST(ExtensionsRecipe, ExtHasTheSectionSValues) {
  const Recipe r = load_recipe("ext");
  const ScheduleConfig& sc = r.schedule;
  EXPECT_EQ(sc.num_scheduled, 1122);
  EXPECT_EQ(sc.growth_steps, 52);
  EXPECT_EQ(sc.growth_stage, 2);
  EXPECT_EQ(sc.num_extension, 20);
  EXPECT_EQ(sc.segment_cap, 2560);
  EXPECT_EQ(sc.final_ws_long, 20);
  EXPECT_DOUBLE_EQ(sc.lr_floor, 0.30);
  ASSERT_EQ(sc.stages.size(), 5u);
  const int64_t batch[] = {131072, 262144, 393216, 327680, 131072};
  const int64_t lmax[] = {896, 2048, 3072, 3072, 3072};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(sc.stages[i].batch_tokens, batch[i]) << i;
    EXPECT_EQ(sc.stages[i].lmax, lmax[i]) << i;
  }
  EXPECT_DOUBLE_EQ(sc.stages[3].lr_mul, 1.73 * std::sqrt(20.0 / 24.0));
  EXPECT_EQ(sc.stages[1].prefix_steps, (std::vector<double>{0.20, 0.15, 0.10, 0.05}));
  EXPECT_EQ(sc.stages[0].sampled_softmax, (std::vector<int64_t>{10240}));
  EXPECT_EQ(sc.stages[2].sampled_softmax, (std::vector<int64_t>{14336, 14336, 24576}));
  EXPECT_TRUE(sc.stages[3].sampled_softmax.empty());
  EXPECT_EQ(r.validation.every, 0);
  EXPECT_EQ(r.validation.batch_tokens, 262144);
  EXPECT_EQ(r.validation.tokens, 5 * 8 * 262144);  // §S.11: 5 batches per rank at W = 8
  // Every switch on; every other [extensions] value is §S's (the ExtensionsConfig defaults, written out in the file).
  ExtensionsConfig expected;
  expected.ngram_rows = 84602880;
  expected.value_embeds_on_cadence = true;
  expected.tail_average = true;
  expected.canonical_mask = "tier1";
  expected.prefix_bucketed = true;
  expected.bank_opt = "anvil";
  expected.log_every = 25;
  expected.warmup_list = true;
  EXPECT_TRUE(r.extensions == expected) << r.canonical();
  EXPECT_EQ(r.extensions.tail_ema_rate, 2.0 / 299);
  EXPECT_EQ(r.extensions.tail_avg_rate, 4.0 / 53);
  EXPECT_EQ(r.extensions.bank_blend_rate, 2.0 / 75);
  EXPECT_NE(r.hash(), load_recipe("head").hash());
}

TEST(ExtensionsRecipe, MiniExtIsExtAtOneSlicePerCall) {
  const Recipe ext = load_recipe("ext"), mini = load_recipe("mini-ext");
  EXPECT_EQ(mini.slices_per_call, 1);
  ASSERT_EQ(mini.schedule.stages.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(mini.schedule.stages[i].batch_tokens * 8, ext.schedule.stages[i].batch_tokens) << i;
    EXPECT_EQ(mini.schedule.stages[i].sampled_softmax, ext.schedule.stages[i].sampled_softmax) << i;
    EXPECT_EQ(mini.schedule.stages[i].prefix_steps, ext.schedule.stages[i].prefix_steps) << i;
  }
  EXPECT_EQ(mini.extensions.ngram_rows, 10575360);
  EXPECT_EQ(mini.extensions.ngram_rows * 8, ext.extensions.ngram_rows);  // one shard of ext's table
  ExtensionsConfig rest = mini.extensions;
  rest.ngram_rows = ext.extensions.ngram_rows;
  EXPECT_TRUE(rest == ext.extensions);
  EXPECT_EQ(mini.validation.tokens, 2097152);
  EXPECT_EQ(mini.validation.every, 0);
  EXPECT_EQ(mini.schedule.segment_cap, 2560);
  EXPECT_EQ(mini.model.model_dim, 768);
}

TEST(ExtensionsRecipe, TinyExtHasTinySizesAndEverySwitchOn) {
  const Recipe r = load_recipe("tiny-ext"), tiny = load_recipe("tiny");
  EXPECT_EQ(r.model.model_dim, 96);
  EXPECT_EQ(r.model.mlp_hidden, tiny.model.mlp_hidden);
  EXPECT_EQ(r.slices_per_call, 1);
  EXPECT_FALSE(r.fp8);
  EXPECT_EQ(r.extensions.ngram_rows, 2 * 50304);
  EXPECT_TRUE(r.extensions.value_embeds_on_cadence);
  EXPECT_TRUE(r.extensions.tail_average);
  EXPECT_EQ(r.extensions.canonical_mask, "tier1");
  EXPECT_TRUE(r.extensions.prefix_bucketed);
  EXPECT_EQ(r.extensions.bank_opt, "anvil");
  EXPECT_TRUE(r.extensions.warmup_list);
  EXPECT_GT(r.extensions.log_every, 1);
  EXPECT_TRUE(r.schedule.warmup);
  EXPECT_GT(r.schedule.segment_cap, 0);
  EXPECT_GT(r.schedule.growth_steps, 0);
  EXPECT_EQ(r.schedule.stages.size(), 5u);
  EXPECT_THAT(r.record.source, HasSubstr("baselines/tiny-ext.toml"));
}

// Every [extensions] key and every §S schedule key can be set from the command line on the three recipes, and doing so
// changes the configuration's identity.
TEST(ExtensionsRecipe, EveryKeyIsOverridable) {
  const std::vector<std::pair<std::string, std::string>> keys = {{"extensions.ngram_rows", "1024"},
                                                                 {"extensions.ngram_late_step", "100"},
                                                                 {"extensions.ngram_max_cycle_steps", "2"},
                                                                 {"extensions.ngram_lr", "0.01"},
                                                                 {"extensions.ngram_lr_mul", "60"},
                                                                 {"extensions.ngram_wd", "0.004"},
                                                                 {"extensions.ngram_eps", "1e-9"},
                                                                 {"extensions.ngram_beta2", "0.9"},
                                                                 {"extensions.ngram_wd_mul_early", "4"},
                                                                 {"extensions.ngram_wd_mul_late", "9"},
                                                                 {"extensions.ngram_cache_rows", "1048576"},
                                                                 {"extensions.value_embeds_on_cadence", "false"},
                                                                 {"extensions.tail_average", "false"},
                                                                 {"extensions.tail_ema_window", "7"},
                                                                 {"extensions.tail_avg_window", "7"},
                                                                 {"extensions.value_embed_avg_window", "7"},
                                                                 {"extensions.bank_blend_window", "7"},
                                                                 {"extensions.tail_ema_rate", "0.125"},
                                                                 {"extensions.tail_avg_rate", "0.25"},
                                                                 {"extensions.bank_blend_rate", "0.375"},
                                                                 {"extensions.tail_avg_every", "3"},
                                                                 {"extensions.bank_blend_every", "3"},
                                                                 {"extensions.tail_ema_ship", "0.5"},
                                                                 {"extensions.bank_blend_ship_qk", "0.5"},
                                                                 {"extensions.bank_blend_ship", "0.5"},
                                                                 {"extensions.canonical_mask", "tier0"},
                                                                 {"extensions.prefix_bucketed", "false"},
                                                                 {"extensions.bank_opt", "normuon"},
                                                                 {"extensions.anvil_rail_warmup", "3"},
                                                                 {"extensions.anvil_fast_switch", "3"},
                                                                 {"extensions.anvil_rail_taper", "3"},
                                                                 {"extensions.anvil_fast_weight", "0.5"},
                                                                 {"extensions.anvil_wd", "2"},
                                                                 {"extensions.log_every", "3"},
                                                                 {"extensions.warmup_list", "false"},
                                                                 {"schedule.growth_steps", "3"},
                                                                 {"schedule.growth_stage", "3"},
                                                                 {"schedule.segment_cap", "1024"},
                                                                 {"schedule.stages.1.prefix_steps", "[0.5, 0.25]"},
                                                                 {"schedule.stages.2.sampled_softmax", "[4096]"}};
  // mini-ext differs from ext only in sizes: a few of its keys suffice (each load costs ~0.1 s under ASan).
  for (const char* name : {"ext", "tiny-ext"}) {
    const Recipe base = load_recipe(name);
    for (const auto& [key, value] : keys) {
      const Recipe r = load_recipe(name, {key + "=" + value});
      EXPECT_NE(r.hash(), base.hash()) << name << " " << key;
    }
  }
  const Recipe mini = load_recipe("mini-ext");
  for (const char* assignment :
       {"extensions.bank_opt=normuon", "extensions.ngram_rows=84602880", "schedule.segment_cap=0",
        "schedule.stages.4.batch_tokens=8192", "extensions.log_every=1"}) {
    EXPECT_NE(load_recipe("mini-ext", {assignment}).hash(), mini.hash()) << assignment;
  }
  const Recipe normuon = load_recipe("ext", {"extensions.bank_opt=normuon"});
  EXPECT_EQ(normuon.extensions.bank_opt, "normuon");
  EXPECT_EQ(load_recipe("ext", {"extensions.canonical_mask=off"}).extensions.canonical_mask, "off");
  EXPECT_EQ(load_recipe("tiny-ext", {"schedule.stages.0.sampled_softmax=[0]"}).schedule.stages[0].sampled_softmax,
            (std::vector<int64_t>{0}));
}

// Recipes that leave the §S keys out (head) still accept them from the command line.
TEST(ExtensionsRecipe, OptionalKeysCanBeSetOnRecipesWithoutThem) {
  const Recipe head = load_recipe("head");
  const Recipe anvil =
      load_recipe("head", {"extensions.bank_opt=anvil", "schedule.segment_cap=2560",
                           "schedule.stages.0.sampled_softmax=[10240]", "schedule.stages.1.prefix_steps=[0.2, 0.1]"});
  EXPECT_EQ(anvil.extensions.bank_opt, "anvil");
  EXPECT_EQ(anvil.schedule.segment_cap, 2560);
  EXPECT_EQ(anvil.schedule.stages[0].sampled_softmax, (std::vector<int64_t>{10240}));
  EXPECT_EQ(anvil.schedule.stages[1].prefix_steps, (std::vector<double>{0.2, 0.1}));
  EXPECT_NE(anvil.hash(), head.hash());
  EXPECT_EQ(load_recipe("head", {"extensions.bank_opt=normuon"}).hash(), head.hash());  // the default
  EXPECT_EQ(load_recipe("head", {"data.cycle_train_shards=false"}).hash(), head.hash());
  EXPECT_THAT(error_of([] { load_recipe("head", {"extensions.bank_optimizer=anvil"}); }),
              HasSubstr("--set extensions.bank_optimizer: unknown key 'bank_optimizer'"));
  EXPECT_THAT(error_of([] { load_recipe("head", {"schedule.segment_capacity=3"}); }),
              HasSubstr("unknown key 'segment_capacity'"));
  EXPECT_THAT(error_of([] { load_recipe("head", {"schedule.stages.0.sampled=[3]"}); }),
              HasSubstr("unknown key 'sampled'"));
}

TEST(ExtensionsRecipe, BadValuesAreRejectedNamingTheKey) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"extensions.bank_opt=adam", {"extensions.bank_opt", "normuon | anvil", "adam"}},
      {"extensions.canonical_mask=tier2", {"extensions.canonical_mask", "off | tier0 | tier1"}},
      {"extensions.ngram_rows=84602884", {"extensions.ngram_rows", "multiple of 8"}},
      {"extensions.ngram_rows=-8", {"extensions.ngram_rows"}},
      {"extensions.ngram_max_cycle_steps=0", {"extensions.ngram_max_cycle_steps"}},
      {"extensions.ngram_beta2=1.0", {"extensions.ngram_beta2", "[0, 1)"}},
      {"extensions.ngram_cache_rows=1000", {"extensions.ngram_cache_rows", "at least 524288"}},
      {"extensions.log_every=0", {"extensions.log_every"}},
      {"extensions.tail_ema_rate=0.0", {"extensions.tail_ema_rate", "(0, 1]"}},
      {"extensions.bank_blend_ship=1.5", {"extensions.bank_blend_ship"}},
      {"extensions.anvil_fast_weight=-0.1", {"extensions.anvil_fast_weight"}},
      {"extensions.tail_average=1", {"extensions.tail_average", "expected a boolean"}},
      {"extensions.bank_opt=3", {"extensions.bank_opt", "expected a string"}},
      {"schedule.stages.0.sampled_softmax=[10000]", {"schedule.stages.0.sampled_softmax", "multiple of 2048"}},
      {"schedule.stages.0.sampled_softmax=[53248]", {"schedule.stages.0.sampled_softmax", "model.vocab_size"}},
      {"schedule.stages.0.sampled_softmax=[]", {"schedule.stages.0.sampled_softmax", "1 to 64"}},
      {"schedule.stages.1.prefix_steps=[]", {"schedule.stages.1.prefix_steps", "1 to 64"}},
      {"schedule.stages.1.prefix_steps=[-0.5]", {"schedule.stages.1.prefix_steps"}},
      {"schedule.segment_cap=100", {"schedule.segment_cap", "multiple of schedule.window_block"}},
      {"schedule.growth_stage=4", {"schedule.growth_stage", "[0, 4)"}},
      {"schedule.growth_steps=-1", {"schedule.growth_steps"}},
  };
  for (const auto& [assignment, fragments] : cases) {
    const std::string msg = error_of([&] { load_recipe("ext", {assignment}); });
    ASSERT_FALSE(msg.empty()) << assignment << " was accepted";
    for (const std::string& f : fragments) EXPECT_THAT(msg, HasSubstr(f)) << assignment;
  }
  EXPECT_THAT(error_of([] { load_recipe("ext", {"extensions.ngram_rows=0"}); }),
              HasSubstr("extensions.value_embeds_on_cadence"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"ext\"\n[extensions]\nngram_dim = 3\n", "typo.toml"); }),
              HasSubstr("typo.toml: unknown key 'extensions.ngram_dim'"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"head\"\n[extensions]\nbank_opt = \"Anvil\"\n", "case.toml"); }),
              HasSubstr("case.toml: key 'extensions.bank_opt' must be one of normuon | anvil, got \"Anvil\""));
}

}  // namespace
}  // namespace gpt
