#pragma once
// The recipe schema: every key a recipe may hold, declared once (recipe_keys.cpp) with its field, type, range or
// allowed values, default, canonical-text rule and a one-line description. Reading a recipe, its canonical text,
// which keys `--set` may add, and the key table of docs/recipes.md (`train_gpt --list-keys`) all come from these
// lists. Checks that relate several keys (model.num_heads × head_dim = model_dim, …) are in recipe_read.cpp.
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "trainer/recipe/recipe.h"

namespace gpt {

// How a key enters Recipe::canonical() (and so the recipe hash).
enum class InCanonical {
  always,        // every recipe writes it
  when_changed,  // only while it differs from its default: recipes written before the key existed keep their hash
  never,         // prose, not configuration (record.source)
};

// One key of a table whose fields live in `Owner` (Recipe for the dotted top-level keys, StageConfig for one entry
// of schedule.stages, AdamGroupConfig / BankConfig for one parameter's table under optimizer.adam / .banks).
template <class Owner>
struct KeySpec {
  // The field a key reads and writes; its type is the key's TOML type (a string with `choices` is an enumeration).
  using Field = std::variant<int64_t& (*)(Owner&), double& (*)(Owner&), bool& (*)(Owner&), std::string& (*)(Owner&),
                             std::vector<double>& (*)(Owner&), std::vector<int64_t>& (*)(Owner&)>;

  std::string_view name;  // dotted path inside the owner's table, as written in recipes and `--set`
  Field field;
  int64_t int_lo = 0, int_hi = 0;           // integers and integer lists: [int_lo, int_hi]
  double lo = 0, hi = 0;                    // numbers and number lists
  bool open_lo = false, open_hi = false;    // numbers: (lo, … and …, hi)
  std::vector<std::string_view> choices{};  // strings: the allowed values (empty: any non-empty string)
  bool optional = false;                    // may be left out (the default is Owner{}'s value); `--set` may add it
  InCanonical canonical = InCanonical::always;
  std::string_view canonical_name{};  // the key's spelling in the canonical text when it differs from `name`
  std::string_view doc;

  // Builders for the declarations: `integer(...).optional_key()` reads better than an aggregate of ten fields.
  KeySpec optional_key() const {
    KeySpec k = *this;
    k.optional = true;
    k.canonical = InCanonical::when_changed;
    return k;
  }
  KeySpec canonical_as(std::string_view spelling) const {
    KeySpec k = *this;
    k.canonical_name = spelling;
    return k;
  }
  KeySpec not_in_canonical() const {
    KeySpec k = *this;
    k.canonical = InCanonical::never;
    return k;
  }
  std::string_view canonical_key() const { return canonical_name.empty() ? name : canonical_name; }
};

// The tables that hold entries rather than keys, each entry read with one of the lists below: `[parent] name` is the
// stage list or a table of one sub-table per parameter. Spelled only here: reading, the canonical text, `--set`,
// error messages and the docs table take the names from these.
struct NestedTable {
  std::string_view parent, name;
  std::string path() const { return std::string(parent) + "." + std::string(name); }  // "schedule.stages"
};
inline constexpr NestedTable kStageList{"schedule", "stages"};   // schedule.stages.N.KEY (an array of tables)
inline constexpr NestedTable kAdamGroups{"optimizer", "adam"};   // optimizer.adam.PARAMETER.KEY
inline constexpr NestedTable kBankTables{"optimizer", "banks"};  // optimizer.banks.PARAMETER.KEY

// The lists, in the order of docs/recipes.md's table. Names of the Recipe keys are full dotted paths
// ("model.num_layers", "slices_per_call"); the others are relative to their entry's table.
const std::vector<KeySpec<Recipe>>& recipe_keys();
const std::vector<KeySpec<StageConfig>>& stage_keys();           // kStageList entries
const std::vector<KeySpec<AdamGroupConfig>>& adam_group_keys();  // kAdamGroups entries
const std::vector<KeySpec<BankConfig>>& bank_keys();             // kBankTables entries

// Names a recipe or `--set` may no longer use, with the name that replaced them.
struct RenamedName {
  std::string_view old_name, new_name;
  bool table = false;  // a table: every key under it moved; a plain key of the old name is merely unknown
};
// Recipe tables and keys (full dotted paths; a table's rename covers every key under it).
const std::vector<RenamedName>& renamed_recipe_keys();
// Shipped recipe names (`--recipe`, `inherits`).
const std::vector<RenamedName>& renamed_recipes();

// The key table of docs/recipes.md (Markdown, one row per key) as `train_gpt --list-keys` prints it.
std::string recipe_key_table_markdown();

}  // namespace gpt
