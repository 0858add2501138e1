// The canonical text of a recipe (RECIPE §0.2) and the hash behind it: every key the schema (recipe_keys.cpp) puts in
// the canonical text, under its canonical spelling, in a fixed layout. Recipes that did not change keep their hash:
// the hash of every recorded run names its recipe by it.
#include <toml++/toml.h>

#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "base/fnv1a.h"
#include "trainer/recipe/recipe.h"
#include "trainer/recipe/recipe_keys.h"

namespace gpt {

namespace {

// A field's value for reading only: the accessors take a mutable owner so that one declaration serves reading and
// writing; nothing is written through this reference.
template <class Get, class Owner>
const auto& value_of(Get get, const Owner& owner) {
  return get(const_cast<Owner&>(owner));
}

// -0.0 and 0.0 are one configuration: both are written as 0.0, so a recipe's hash does not depend on the sign of a
// zero it was given.
template <class T>
T canonical_value(const T& v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v == T(0) ? T(0) : v;
  } else {
    return v;
  }
}

template <class T>
toml::array to_array(const std::vector<T>& values) {
  toml::array a;
  for (const T& v : values) a.push_back(canonical_value(v));
  return a;
}

// The table at dotted `path` under `root`, created where missing; `leaf` receives the last part.
toml::table& table_for(toml::table& root, std::string_view path, std::string& leaf) {
  toml::table* t = &root;
  for (size_t dot = path.find('.'); dot != std::string_view::npos; dot = path.find('.')) {
    const std::string part(path.substr(0, dot));
    if (!t->contains(part)) t->insert(part, toml::table{});
    t = t->get_as<toml::table>(part);
    path.remove_prefix(dot + 1);
  }
  leaf = std::string(path);
  return *t;
}

template <class Owner>
toml::table canonical_table(const std::vector<KeySpec<Owner>>& keys, const Owner& owner) {
  static const Owner defaults{};
  toml::table out;
  for (const KeySpec<Owner>& k : keys) {
    if (k.canonical == InCanonical::never) continue;
    std::visit(
        [&](auto get) {
          const auto& value = value_of(get, owner);
          if (k.canonical == InCanonical::when_changed && value == value_of(get, defaults)) return;
          std::string leaf;
          toml::table& t = table_for(out, k.canonical_key(), leaf);
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, std::vector<double>> || std::is_same_v<T, std::vector<int64_t>>) {
            t.insert(leaf, to_array(value));
          } else {
            t.insert(leaf, canonical_value(value));
          }
        },
        k.field);
  }
  return out;
}

}  // namespace

std::string Recipe::canonical() const {
  toml::table root = canonical_table(recipe_keys(), *this);
  toml::array stages_a;
  for (const StageConfig& s : schedule.stages) stages_a.push_back(canonical_table(stage_keys(), s));
  root.get_as<toml::table>(kStageList.parent)->insert(kStageList.name, std::move(stages_a));
  toml::table adam_t, banks_t;
  for (const auto& [k, a] : optimizer.adam) adam_t.insert(k, canonical_table(adam_group_keys(), a));
  for (const auto& [k, b] : optimizer.banks) banks_t.insert(k, canonical_table(bank_keys(), b));
  root.get_as<toml::table>(kAdamGroups.parent)->insert(kAdamGroups.name, std::move(adam_t));
  root.get_as<toml::table>(kBankTables.parent)->insert(kBankTables.name, std::move(banks_t));
  std::ostringstream os;
  os << toml::toml_formatter(root, toml::format_flags::none);
  return os.str();
}

std::string Recipe::hash() const {
  return fnv1a64_hex(canonical(), kFnv1a64StoredHashBasis);  // stored with every run: never changes
}

}  // namespace gpt
