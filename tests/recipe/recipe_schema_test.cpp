// The recipe schema (trainer/recipe/recipe_keys.h): the shipped recipes keep the hashes they had before the schema,
// errors name the key and where its value came from, `--set` accepts what the schema declares, the renamed §S
// names are refused with their new names, and docs/recipes.md shows the generated key table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "tests/common/error_of.h"
#include "trainer/recipe/recipe.h"
#include "trainer/recipe/recipe_keys.h"

namespace gpt {
namespace {

using test::error_of;
using ::testing::HasSubstr;

// Recipe::hash() of every shipped recipe as computed by the reader and canonical() written before the schema (one
// function per key list), the §S recipes then named seed / mini-seed / tiny-seed with a [seed] table. The canonical
// text of every recipe was compared byte for byte between the two implementations; these pin it from now on.
TEST(RecipeSchema, ShippedRecipesKeepTheHashesOfTheCodeBeforeTheSchema) {
  const std::vector<std::pair<std::string, std::string>> pinned = {
      {"head", "37bd9baf96ce2997"},     {"track1", "37bd9baf96ce2997"}, {"tiny", "1ab04ba154357d91"},
      {"mini", "0e62c7b087efd987"},     {"ext", "c17520c18ac566ad"},    {"mini-ext", "1833e9e53183cc99"},
      {"tiny-ext", "d5248c56b06be408"},
  };
  for (const auto& [name, hash] : pinned) EXPECT_EQ(load_recipe(name).hash(), hash) << name;
}

// The [extensions] keys keep their old canonical spelling under `seed` (so the §S recipes keep their hashes),
// and record.target keeps `target_loss`; record.source never enters the text.
TEST(RecipeSchema, CanonicalTextKeepsTheOldSpellings) {
  const std::string text = load_recipe("tiny-ext").canonical();
  EXPECT_THAT(text, HasSubstr("[seed]\n"));
  EXPECT_THAT(text, HasSubstr("seed_warmup = true"));
  EXPECT_THAT(text, HasSubstr("target_loss = 7.75"));
  EXPECT_EQ(text.find("extensions"), std::string::npos) << text;
  EXPECT_EQ(text.find("warmup_list"), std::string::npos) << text;
  EXPECT_EQ(text.find("baselines/"), std::string::npos) << text;
}

TEST(RecipeSchema, UnknownKeyInAFileNamesTheKeyAndTheFile) {
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"tiny\"\n[validation]\nevery_n = 3\n", "mine.toml"); }),
              HasSubstr("recipe mine.toml: unknown key 'validation.every_n'"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"tiny\"\n[modle]\nmodel_dim = 96\n", "mine.toml"); }),
              HasSubstr("recipe mine.toml: unknown key 'modle'"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"tiny\"\nfp16 = true\n", "mine.toml"); }),
              HasSubstr("recipe mine.toml: unknown key 'fp16'"));
}

TEST(RecipeSchema, OutOfRangeInAFileNamesTheKeyTheRangeAndTheFile) {
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"tiny\"\n[model]\nnum_layers = 12\n", "mine.toml"); }),
              HasSubstr("recipe mine.toml: key 'model.num_layers' must be an integer in [11, 11], got 12"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"tiny-ext\"\n[extensions]\ntail_avg_rate = 0\n", "r.toml"); }),
              HasSubstr("recipe r.toml: key 'extensions.tail_avg_rate' must be a number in (0, 1], got 0"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"tiny\"\n[schedule]\nmomentum_max = 1\n", "r.toml"); }),
              HasSubstr("recipe r.toml: key 'schedule.momentum_max' must be a number in [0, 1), got 1"));
}

TEST(RecipeSchema, SetOfAnUnknownKeyIsRefused) {
  EXPECT_THAT(error_of([] { load_recipe("tiny", {"model.num_layer=11"}); }),
              HasSubstr("--set model.num_layer: unknown key 'num_layer' in recipe"));
  // [extensions] is optional: --set may open it on a recipe without it, but only for a declared key.
  EXPECT_THAT(error_of([] { load_recipe("tiny", {"extensions.ngram_row=16"}); }),
              HasSubstr("--set extensions.ngram_row: unknown key 'ngram_row' in recipe"));
  EXPECT_THAT(error_of([] { load_recipe("tiny", {"extension.ngram_rows=16"}); }),
              HasSubstr("--set extension.ngram_rows: unknown key 'extension' in recipe"));
  EXPECT_THAT(error_of([] { load_recipe("tiny", {"schedule.stages.0.prefix=[0.5]"}); }),
              HasSubstr("--set schedule.stages.0.prefix: unknown key 'prefix' in recipe"));
}

TEST(RecipeSchema, SetRangeErrorNamesTheFlag) {
  EXPECT_THAT(error_of([] { load_recipe("tiny", {"model.num_layers=12"}); }),
              HasSubstr("--set model.num_layers=12: key 'model.num_layers' must be an integer in [11, 11], got 12"));
  // An optional key the recipe leaves out is blamed on the flag too.
  EXPECT_THAT(error_of([] { load_recipe("tiny", {"extensions.log_every=0"}); }),
              HasSubstr("--set extensions.log_every=0: key 'extensions.log_every' must be an integer in [1, "));
  EXPECT_THAT(error_of([] { load_recipe("tiny", {"schedule.stages.1.sampled_softmax=[-2048]"}); }),
              HasSubstr("--set schedule.stages.1.sampled_softmax=[-2048]: key 'schedule.stages.1.sampled_softmax' "
                        "entries must lie in [0, 131072], got -2048"));
}

// Every optional key of the schema can be added with --set on a recipe that leaves it out.
TEST(RecipeSchema, SetMayAddEveryOptionalKey) {
  const Recipe tiny = load_recipe("tiny");
  std::vector<std::string> assignments;
  for (const KeySpec<Recipe>& k : recipe_keys()) {
    if (!k.optional) continue;
    std::visit(
        [&](auto get) {
          using T = std::decay_t<decltype(get(std::declval<Recipe&>()))>;
          const std::string key(k.name);
          if constexpr (std::is_same_v<T, bool>) {
            assignments.push_back(key + "=false");
          } else if constexpr (std::is_same_v<T, std::string>) {
            assignments.push_back(key + "=" + std::string(k.choices.front()));
          } else if constexpr (std::is_same_v<T, int64_t>) {
            assignments.push_back(key + "=" + std::to_string(k.int_lo == 0 ? 0 : k.int_lo));
          } else if constexpr (std::is_same_v<T, double>) {
            assignments.push_back(key + "=" + std::to_string(k.hi));
          }
        },
        k.field);
  }
  EXPECT_GT(assignments.size(), 30u);
  for (const std::string& a : assignments) {
    // Each alone (a value at the edge of its range may break a cross-key check, which names other keys).
    const std::string msg = error_of([&] { load_recipe("tiny", {a}); });
    EXPECT_EQ(msg.find("unknown key"), std::string::npos) << a << ": " << msg;
  }
  EXPECT_EQ(load_recipe("tiny", {"schedule.stages.2.prefix_steps=[0.5]"}).schedule.stages[2].prefix_steps,
            (std::vector<double>{0.5}));
}

TEST(RecipeSchema, RenamedSectionSNamesAreRefusedWithTheNewName) {
  EXPECT_THAT(error_of([] { load_recipe("seed"); }), HasSubstr("recipe 'seed' was renamed to 'ext'"));
  EXPECT_THAT(error_of([] { load_recipe("mini-seed"); }), HasSubstr("recipe 'mini-seed' was renamed to 'mini-ext'"));
  EXPECT_THAT(error_of([] { load_recipe("tiny-seed"); }), HasSubstr("recipe 'tiny-seed' was renamed to 'tiny-ext'"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"tiny-seed\"\n", "old.toml"); }),
              HasSubstr("recipe old.toml: inherits = \"tiny-seed\": recipe 'tiny-seed' was renamed to 'tiny-ext'"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"tiny\"\n[seed]\nlog_every = 5\n", "old.toml"); }),
              HasSubstr("recipe old.toml: the [seed] table was renamed to [extensions]"));
  EXPECT_THAT(error_of([] { load_recipe("tiny", {"seed.bank_opt=anvil"}); }),
              HasSubstr("--set seed.bank_opt=anvil: 'seed' was renamed to 'extensions'; use --set "
                        "extensions.bank_opt=anvil"));
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"tiny\"\n[extensions]\nseed_warmup = true\n", "old.toml"); }),
              HasSubstr("recipe old.toml: key 'extensions.seed_warmup' was renamed to 'extensions.warmup_list'"));
  EXPECT_THAT(error_of([] { load_recipe("tiny-ext", {"extensions.seed_warmup=false"}); }),
              HasSubstr("use --set extensions.warmup_list=false"));
  // The RNG seed is no recipe key (it is train_gpt's --seed): a plain `seed` key is merely unknown.
  EXPECT_THAT(error_of([] { parse_recipe("inherits = \"tiny\"\nseed = 3\n", "old.toml"); }),
              HasSubstr("recipe old.toml: unknown key 'seed'"));
}

TEST(RecipeSchema, KeyNamesAreUnique) {
  std::set<std::string> seen;
  for (const auto& k : recipe_keys()) EXPECT_TRUE(seen.insert(std::string(k.name)).second) << k.name;
  for (const auto& k : stage_keys()) EXPECT_TRUE(seen.insert("stage." + std::string(k.name)).second) << k.name;
  std::set<std::string> canonical;
  for (const auto& k : recipe_keys()) {
    EXPECT_TRUE(canonical.insert(std::string(k.canonical_key())).second) << k.canonical_key();
  }
}

// docs/recipes.md holds the generated table between its markers (regenerate with `train_gpt --list-keys`).
TEST(RecipeSchema, DocsTableIsTheGeneratedOne) {
  const std::filesystem::path doc = default_recipe_dir().parent_path().parent_path() / "docs" / "recipes.md";
  std::ifstream in(doc);
  ASSERT_TRUE(in.good()) << doc;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::string begin = "<!-- recipe-keys:begin (train_gpt --list-keys) -->\n", end = "<!-- recipe-keys:end -->";
  const size_t b = text.find(begin), e = text.find(end);
  ASSERT_NE(b, std::string::npos) << doc;
  ASSERT_NE(e, std::string::npos) << doc;
  EXPECT_EQ(text.substr(b + begin.size(), e - b - begin.size()), recipe_key_table_markdown())
      << "docs/recipes.md's key table is stale: replace it with the output of `train_gpt --list-keys`";
}

TEST(RecipeSchema, GeneratedTableHasARowPerKey) {
  const std::string table = recipe_key_table_markdown();
  size_t rows = 0;
  for (char c : table) rows += c == '\n';
  EXPECT_EQ(rows, 2 + recipe_keys().size() + stage_keys().size() + adam_group_keys().size() + bank_keys().size());
  EXPECT_THAT(table, HasSubstr("| `model.num_layers` | integer | [11, 11] | required | always |"));
  EXPECT_THAT(table, HasSubstr("| `extensions.bank_opt` | choice | `normuon` \\| `anvil` | `\"normuon\"` | "
                               "if not default (as `seed.bank_opt`) |"));
  EXPECT_THAT(table, HasSubstr("| `record.target` | number | [0, 100] | required | always (as `target_loss`) |"));
  EXPECT_THAT(table, HasSubstr("| `schedule.stages.N.sampled_softmax` | list of integers | [0, 2^17] | [] |"));
}

}  // namespace
}  // namespace gpt
