#pragma once
// Internal to trainer/recipe: typed reading of a recipe's TOML tree with strict key checks (Reader), shared by the
// files that load and read it (recipe_load.cpp, recipe_read.cpp). Not part of the recipe API.
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"
#include "trainer/recipe/recipe.h"

namespace gpt::recipe_detail {

inline const char* node_type_name(const toml::node& n) {
  if (n.is_table()) return "a table";
  if (n.is_array()) return "an array";
  if (n.is_integer()) return "an integer";
  if (n.is_floating_point()) return "a number";
  if (n.is_boolean()) return "a boolean";
  if (n.is_string()) return "a string";
  return "a date/time";
}

// The `--set` assignments of a load by full key ("model.num_heads" -> "model.num_heads=0"): a value out of range that
// came from the command line is blamed on its flag, not on the recipe file.
using Overrides = std::map<std::string, std::string, std::less<>>;

class Reader {
 public:
  Reader(const toml::table& table, std::string path, std::string source, const Overrides* overrides = nullptr)
      : table_(table), path_(std::move(path)), source_(std::move(source)), overrides_(overrides) {}

  // Rejects keys that no getter asked for.
  void finish() const {
    for (const auto& [key, node] : table_) {
      GPT_CHECK(used_.count(std::string(key.str())) != 0, "recipe ", source_, ": unknown key '", full(key.str()), "'");
    }
  }

  int64_t integer(const std::string& key, int64_t lo, int64_t hi = INT64_MAX) {
    const toml::node& n = get(key);
    GPT_CHECK(n.is_integer(), where(key), " must be an integer in [", lo, ", ", hi, "], got ", node_type_name(n));
    const int64_t v = n.value<int64_t>().value();
    GPT_CHECK(v >= lo && v <= hi, where(key), " must be an integer in [", lo, ", ", hi, "], got ", v);
    return v;
  }

  // A number in [lo, hi], or (lo, … with open_lo, …, hi) with open_hi.
  double number(const std::string& key, double lo, double hi, bool open_hi = false, bool open_lo = false) {
    const toml::node& n = get(key);
    GPT_CHECK(n.is_number(), where(key), " must be a number, got ", node_type_name(n));
    const double v = as_double(n, key);
    const bool ok = std::isfinite(v) && (open_lo ? v > lo : v >= lo) && (open_hi ? v < hi : v <= hi);
    GPT_CHECK(ok, where(key), " must be a number in ", open_lo ? "(" : "[", lo, ", ", hi, open_hi ? ")" : "]", ", got ",
              v);
    return v;
  }

  bool boolean(const std::string& key) {
    const toml::node& n = get(key);
    GPT_CHECK(n.is_boolean(), where(key), " must be true or false, got ", node_type_name(n));
    return n.value<bool>().value();
  }

  std::vector<double> numbers(const std::string& key, double lo, double hi) {
    const toml::node& n = get(key);
    GPT_CHECK(n.is_array(), where(key), " must be an array of numbers");
    std::vector<double> out;
    for (const toml::node& e : *n.as_array()) {
      GPT_CHECK(e.is_number(), where(key), " must be an array of numbers, found ", node_type_name(e));
      const double v = as_double(e, key);
      GPT_CHECK(std::isfinite(v) && v >= lo && v <= hi, where(key), " entries must lie in [", lo, ", ", hi, "], got ",
                v);
      out.push_back(v);
    }
    return out;
  }

  std::vector<int64_t> integers(const std::string& key, int64_t lo, int64_t hi) {
    const toml::node& n = get(key);
    GPT_CHECK(n.is_array(), where(key), " must be an array of integers");
    std::vector<int64_t> out;
    for (const toml::node& e : *n.as_array()) {
      GPT_CHECK(e.is_integer(), where(key), " must be an array of integers, found ", node_type_name(e));
      const int64_t v = e.value<int64_t>().value();
      GPT_CHECK(v >= lo && v <= hi, where(key), " entries must lie in [", lo, ", ", hi, "], got ", v);
      out.push_back(v);
    }
    return out;
  }

  // A string that must be one of `choices`; the error names the key and lists them.
  std::string choice(const std::string& key, const std::vector<std::string_view>& choices) {
    const toml::node& n = get(key);
    std::string list;
    for (const std::string_view c : choices) list += (list.empty() ? "" : " | ") + std::string(c);
    GPT_CHECK(n.is_string(), where(key), " must be one of ", list, ", got ", node_type_name(n));
    const std::string v = n.value<std::string>().value();
    GPT_CHECK(std::find(choices.begin(), choices.end(), v) != choices.end(), where(key), " must be one of ", list,
              ", got \"", v, "\"");
    return v;
  }

  std::string text(const std::string& key) {
    const toml::node& n = get(key);
    GPT_CHECK(n.is_string() && !n.value<std::string>()->empty(), where(key), " must be a non-empty string, got ",
              node_type_name(n));
    return n.value<std::string>().value();
  }

  bool has(const std::string& key) const { return table_.contains(key); }

  Reader table(const std::string& key) {
    const toml::node& n = get(key);
    GPT_CHECK(n.is_table(), where(key), " must be a table, got ", node_type_name(n));
    return Reader(*n.as_table(), full(key), source_, overrides_);
  }

  std::vector<Reader> tables(const std::string& key) {
    const toml::node& n = get(key);
    GPT_CHECK(n.is_array_of_tables(), where(key), " must be an array of tables");
    std::vector<Reader> out;
    const toml::array& a = *n.as_array();
    for (size_t i = 0; i < a.size(); ++i) {
      out.emplace_back(*a.get(i)->as_table(), full(key) + "." + std::to_string(i), source_, overrides_);
    }
    return out;
  }

  std::vector<std::string> keys() {
    std::vector<std::string> out;
    for (const auto& [key, node] : table_) out.emplace_back(key.str());
    return out;
  }

  const std::string& source() const { return source_; }
  // A number node as a double. toml++ gives none for an integer a double cannot hold exactly (beyond 2^53).
  double as_double(const toml::node& n, const std::string& key) const {
    const std::optional<double> v = n.value<double>();
    GPT_CHECK(v.has_value(), where(key), " holds the integer ", n.value<int64_t>().value_or(0),
              ", which a double cannot hold exactly; expected a number in range");
    return *v;
  }
  std::string full(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  // Where a key's value came from, to start an error: "--set K=V: key 'K'" or "recipe FILE: key 'K'".
  std::string where(std::string_view key) const {
    const std::string k = full(key);
    if (overrides_ != nullptr) {
      if (const auto it = overrides_->find(k); it != overrides_->end())
        return "--set " + it->second + ": key '" + k + "'";
    }
    return "recipe " + source_ + ": key '" + k + "'";
  }

 private:
  const toml::node& get(const std::string& key) {
    const toml::node* n = table_.get(key);
    GPT_CHECK(n != nullptr, "recipe ", source_, ": missing key '", full(key), "'");
    used_.insert(key);
    return *n;
  }

  const toml::table& table_;
  std::string path_, source_;
  const Overrides* overrides_;
  std::set<std::string> used_;
};

// The typed reading of a merged, overridden recipe tree against the schema (recipe_keys.h), with the checks that
// relate several keys. Defined in recipe_read.cpp.
Recipe read_recipe(const toml::table& tree, const std::string& name, const std::string& source,
                   const Overrides& overrides);

// Whether `--set` may create the missing key parts[0..i] (a table on the way, or the key itself): only on the way
// to an optional key of the schema. Defined in recipe_read.cpp.
bool may_create(const std::vector<std::string>& parts, size_t i);

}  // namespace gpt::recipe_detail
