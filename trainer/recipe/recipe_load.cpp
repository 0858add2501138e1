// Loading a recipe (RECIPE §0.2): files and their size limit, `inherits`, merging, `--set` overrides and the renamed
// names. The typed reading against the schema is recipe_read.cpp's, the canonical text and hash recipe_canonical.cpp's.
#include "trainer/recipe/recipe.h"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <functional>
#include <set>

#include "base/check.h"
#include "base/file_read.h"
#include "trainer/recipe/recipe_keys.h"
#include "trainer/recipe/toml_reader.h"
#include "source_dir.h"

namespace gpt {

namespace {

using recipe_detail::node_type_name;
using recipe_detail::Reader;

// ---- loading and merging the TOML tree ---------------------------------------------------------------------

// The shipped recipes are a few KiB; a recipe past this size is refused before it is read or parsed, since a huge
// array would cost gigabytes and many seconds to parse only to be refused by the typed reading.
constexpr std::uintmax_t kMaxRecipeBytes = std::uintmax_t{1} << 20;

void check_recipe_size(std::uintmax_t bytes, const std::string& what) {
  GPT_CHECK(bytes <= kMaxRecipeBytes, what, " is ", bytes, " bytes; a recipe may hold at most ", kMaxRecipeBytes,
            " bytes (1 MiB)");
}

toml::table parse_text(const std::string& text, const std::string& source) {
  check_recipe_size(text.size(), "recipe " + source);
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    GPT_FAIL("recipe ", source, ": TOML syntax error at line ", e.source().begin.line, ", column ",
             e.source().begin.column, ": ", e.description());
  }
}

// Reads a recipe file; anything but a regular file (a FIFO, a device, a folder) is refused before opening, since
// reading one could block forever or never end.
std::string read_recipe_file(const std::filesystem::path& path, const std::string& what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  GPT_CHECK(!ec && std::filesystem::exists(status), what, " ", path.string(), " does not exist");
  GPT_CHECK(std::filesystem::is_regular_file(status), what, " ", path.string(),
            " is not a regular file (a FIFO, device or folder cannot be a recipe)");
  const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
  GPT_CHECK(!ec, what, " ", path.string(), " cannot be read (", ec.message(), ")");
  check_recipe_size(bytes, what + " " + path.string());
  std::optional<std::string> text = try_read_file(path);
  GPT_CHECK(text.has_value(), what, " ", path.string(), " cannot be read");
  return std::move(*text);
}

bool names_a_path(const std::string& name_or_path) {
  const std::filesystem::path p(name_or_path);
  return p.extension() == ".toml" || p.has_parent_path();
}

// A missing recipe whose name was renamed (the §S profile `seed` is now `ext`): the error names the new name.
void refuse_renamed_recipe(const std::string& name, const std::string& context) {
  for (const RenamedName& renamed : renamed_recipes()) {
    GPT_CHECK(name != renamed.old_name, context, "recipe '", name, "' was renamed to '", renamed.new_name,
              "' (RECIPE §S extensions; `seed` is only the RNG seed, --seed)");
  }
}

std::filesystem::path resolve_recipe_path(const std::string& name_or_path, const std::filesystem::path& dir) {
  if (names_a_path(name_or_path)) return name_or_path;
  return dir / (name_or_path + ".toml");
}

// The file `inherits = "NAME"` of a recipe in `including_dir` means: a path (NAME ends in .toml or has a folder) is
// relative to the including recipe's folder; a bare name is a recipe in that folder, else a shipped recipe.
std::filesystem::path resolve_inherited(const std::string& name, const std::filesystem::path& including_dir,
                                        const std::string& source) {
  std::vector<std::filesystem::path> candidates;
  if (names_a_path(name)) {
    const std::filesystem::path p(name);
    candidates.push_back(p.is_absolute() ? p : including_dir / p);
  } else {
    candidates.push_back(including_dir / (name + ".toml"));
    const std::filesystem::path shipped = default_recipe_dir() / (name + ".toml");
    if (shipped.lexically_normal() != candidates.front().lexically_normal()) candidates.push_back(shipped);
  }
  std::string looked;
  for (const auto& c : candidates) {
    std::error_code ec;
    if (std::filesystem::exists(c, ec)) return c;
    looked += (looked.empty() ? "" : " and ") + c.string();
  }
  refuse_renamed_recipe(name, "recipe " + source + ": inherits = \"" + name + "\": ");
  GPT_FAIL("recipe ", source, ": inherits = \"", name, "\" names no recipe (looked for ", looked, ")");
}

// Overlays `over` on `base`: tables merge key by key, arrays of tables of equal length merge element by element,
// anything else replaces.
void merge_into(toml::table& base, const toml::table& over) {
  for (const auto& [key, node] : over) {
    toml::node* existing = base.get(key.str());
    if (existing != nullptr && existing->is_table() && node.is_table()) {
      merge_into(*existing->as_table(), *node.as_table());
      continue;
    }
    if (existing != nullptr && existing->is_array_of_tables() && node.is_array_of_tables() &&
        existing->as_array()->size() == node.as_array()->size()) {
      toml::array& dst = *existing->as_array();
      const toml::array& src = *node.as_array();
      for (size_t i = 0; i < src.size(); ++i) merge_into(*dst.get(i)->as_table(), *src.get(i)->as_table());
      continue;
    }
    const std::string name(key.str());  // a named copy: lambdas may not capture structured bindings before clang 16
    node.visit([&](const auto& value) { base.insert_or_assign(name, value); });
  }
}

toml::table load_tree(const std::string& text, const std::string& source, const std::filesystem::path& dir, int depth) {
  GPT_CHECK(depth < 8, "recipe ", source, ": `inherits` chain deeper than 8 (a cycle?)");
  toml::table tree = parse_text(text, source);
  const toml::node* parent = tree.get("inherits");
  if (parent == nullptr) return tree;
  GPT_CHECK(parent->is_string(), "recipe ", source, ": key 'inherits' must be a recipe name (string)");
  const std::string parent_name = parent->value<std::string>().value();
  // Quoted whole in the errors below: a name beyond any path length would make a message of megabytes.
  GPT_CHECK(parent_name.size() <= 4096, "recipe ", source, ": inherits = \"", parent_name.substr(0, 60), "...\" is ",
            parent_name.size(), " characters long; expected a recipe name or path (at most 4096)");
  const std::filesystem::path base_path = resolve_inherited(parent_name, dir, source);
  toml::table merged = load_tree(read_recipe_file(base_path, "recipe " + source + ": inherited recipe"),
                                 base_path.string(), base_path.parent_path(), depth + 1);
  tree.erase("inherits");
  merge_into(merged, tree);
  return merged;
}

// A bare word (letters, digits, '_', '-', starting with a letter; not a TOML boolean or special float) given to --set
// is taken as a string, so `--set extensions.bank_opt=anvil` needs no shell-quoted TOML quotes.
bool is_bare_word(const std::string& text) {
  if (text.empty() || std::isalpha(static_cast<unsigned char>(text[0])) == 0) return false;
  if (text == "true" || text == "false" || text == "inf" || text == "nan") return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-'; });
}

// Applies one "dotted.key=value" override in place.
void apply_override(toml::table& tree, const std::string& assignment, const std::string& source) {
  const size_t eq = assignment.find('=');
  GPT_CHECK(eq != std::string::npos && eq > 0, "--set ", assignment, ": expected key=value");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  GPT_CHECK(key != "target_loss",
            "--set target_loss: 'target_loss' moved to the [record] table; use --set "
            "record.target=",
            text);
  for (const RenamedName& renamed : renamed_recipe_keys()) {
    const std::string old_name(renamed.old_name);
    if (renamed.table ? !key.starts_with(old_name + ".") : key != old_name) continue;
    GPT_FAIL("--set ", assignment, ": '", old_name, "' was renamed to '", renamed.new_name, "'; use --set ",
             renamed.new_name, key.substr(old_name.size()), "=", text,
             renamed.table ? " (RECIPE §S extensions; `seed` is only the RNG seed, --seed)" : "");
  }
  std::vector<std::string> parts;
  for (size_t b = 0;;) {
    const size_t e = key.find('.', b);
    parts.push_back(key.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  // Walk to the parent container of the last part.
  toml::node* parent = &tree;
  toml::node* target = nullptr;
  bool creating = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (auto* t = parent->as_table()) {
      target = t->get(part);
    } else if (auto* a = parent->as_array()) {
      char* end = nullptr;
      const long idx = std::strtol(part.c_str(), &end, 10);
      GPT_CHECK(!part.empty() && *end == '\0' && idx >= 0 && static_cast<size_t>(idx) < a->size(), "--set ", key, ": '",
                part, "' must be an index in [0, ", a->size(), ") of an array");
      target = a->get(static_cast<size_t>(idx));
    } else {
      GPT_FAIL("--set ", key, ": '", part, "' is below a value that is neither a table nor an array");
    }
    if (target == nullptr && parent->is_table() && recipe_detail::may_create(parts, i)) {
      // An optional key the recipe leaves at its default: create it (its table too); the typed reading checks it.
      if (i + 1 < parts.size()) {
        parent->as_table()->insert(part, toml::table{});
        target = parent->as_table()->get(part);
      } else {
        creating = true;
      }
    }
    GPT_CHECK(target != nullptr || creating, "--set ", key, ": unknown key '", part, "' in recipe ", source);
    if (i + 1 < parts.size()) parent = target;
  }
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + (is_bare_word(text) ? "\"" + text + "\"" : text), "--set " + key);
  } catch (const toml::parse_error& e) {
    GPT_FAIL("--set ", key, ": value '", text, "' is not a TOML value (", e.description(), ")",
             creating ? std::string() : std::string("; expected ") + node_type_name(*target));
  }
  const toml::node& value = *parsed.get("v");
  // A decimal too small for a double parses as 0 without a word (1e-400): refused, as 1e400 is.
  const std::string mantissa = text.substr(0, text.find_first_of("eE"));
  GPT_CHECK(!(value.is_floating_point() && value.value<double>().value_or(1.0) == 0.0 &&
              mantissa.find_first_of("123456789") != std::string::npos),
            "--set ", key, ": value '", text, "' is too small for a double (it would be read as 0)");
  if (creating) {
    value.visit([&](const auto& v) { parent->as_table()->insert_or_assign(parts.back(), v); });
    return;
  }
  GPT_CHECK(!target->is_table(), "--set ", key, ": is a table; set its keys one by one");
  const bool int_to_float = target->is_floating_point() && value.is_integer();
  GPT_CHECK(int_to_float || target->type() == value.type(), "--set ", key, ": expected ", node_type_name(*target),
            ", got '", text, "'");
  auto assign = [&](auto&& replacement) {
    if (auto* t = parent->as_table()) {
      t->insert_or_assign(parts.back(), std::forward<decltype(replacement)>(replacement));
    } else {
      toml::array& a = *parent->as_array();
      const auto idx = static_cast<ptrdiff_t>(std::strtol(parts.back().c_str(), nullptr, 10));
      a.replace(a.cbegin() + idx, std::forward<decltype(replacement)>(replacement));
    }
  };
  if (int_to_float) {
    assign(static_cast<double>(value.value<int64_t>().value()));
  } else {
    value.visit([&](const auto& v) { assign(v); });
  }
}

}  // namespace

std::filesystem::path default_recipe_dir() {
  return std::filesystem::path(SPEEDRUN_SOURCE_DIR) / "trainer" / "recipes";
}

Recipe parse_recipe(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides, const std::filesystem::path& recipe_dir) {
  toml::table tree = load_tree(toml_text, source_name, recipe_dir, 0);
  recipe_detail::Overrides assignments;
  for (const std::string& o : overrides) {
    apply_override(tree, o, source_name);
    assignments[o.substr(0, o.find('='))] = o;  // a later --set of the same key wins, as in the tree
  }
  const std::string name = std::filesystem::path(source_name).stem().string();
  return recipe_detail::read_recipe(tree, name, source_name, assignments);
}

Recipe load_recipe(const std::string& name_or_path, const std::vector<std::string>& overrides,
                   const std::filesystem::path& recipe_dir) {
  const std::filesystem::path path = resolve_recipe_path(name_or_path, recipe_dir);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) refuse_renamed_recipe(name_or_path, "");
  GPT_CHECK(std::filesystem::exists(path, ec), "recipe '", name_or_path, "' not found (looked for ", path.string(),
            ")");
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : recipe_dir;
  return parse_recipe(read_recipe_file(path, "recipe file"), path.string(), overrides, dir);
}

}  // namespace gpt
