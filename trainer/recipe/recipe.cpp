#include "trainer/recipe/recipe.h"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "base/check.h"
#include "base/fnv1a.h"
#include "base/file_read.h"
#include "trainer/recipe/recipe_reader.h"
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

toml::table load_tree(const std::string& text, const std::string& source, const std::filesystem::path& dir,
                      int depth) {
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


// Keys a recipe may leave out (their defaults keep older recipes' meaning and hash): `--set` may still set them.
// parts[0..i] is the path walked so far. Any key under [seed] and [data] qualifies (unknown names are then rejected
// by the typed reading, naming the key).
bool optional_key(const std::vector<std::string>& parts, size_t i) {
  const bool optional_table = parts[0] == "seed" || parts[0] == "data";
  if (optional_table) return parts.size() == 2;
  if (i + 1 != parts.size()) return false;
  const std::string& last = parts.back();
  if (parts.size() == 2 && parts[0] == "schedule") {
    return last == "growth_steps" || last == "growth_stage" || last == "segment_cap";
  }
  return parts.size() == 4 && parts[0] == "schedule" && parts[1] == "stages" &&
         (last == "prefix_steps" || last == "sampled_softmax");
}

// A bare word (letters, digits, '_', '-', starting with a letter; not a TOML boolean or special float) given to --set
// is taken as a string, so `--set seed.bank_opt=anvil` needs no shell-quoted TOML quotes.
bool is_bare_word(const std::string& text) {
  if (text.empty() || std::isalpha(static_cast<unsigned char>(text[0])) == 0) return false;
  if (text == "true" || text == "false" || text == "inf" || text == "nan") return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
  });
}

// Applies one "dotted.key=value" override in place.
void apply_override(toml::table& tree, const std::string& assignment, const std::string& source) {
  const size_t eq = assignment.find('=');
  GPT_CHECK(eq != std::string::npos && eq > 0, "--set ", assignment, ": expected key=value");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  GPT_CHECK(key != "target_loss", "--set target_loss: 'target_loss' moved to the [record] table; use --set "
                                  "record.target=", text);
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
      GPT_CHECK(!part.empty() && *end == '\0' && idx >= 0 && static_cast<size_t>(idx) < a->size(), "--set ", key,
                ": '", part, "' must be an index in [0, ", a->size(), ") of an array");
      target = a->get(static_cast<size_t>(idx));
    } else {
      GPT_FAIL("--set ", key, ": '", part, "' is below a value that is neither a table nor an array");
    }
    if (target == nullptr && parent->is_table() && optional_key(parts, i)) {
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


// Upper bounds of the sizes and counts (far above any real recipe): they keep every product the trainer forms
// (tensor shapes, window × block, batch × steps, offsets) inside int64 and its allocations finite, so a mistyped
// value is an error naming its key instead of an overflow, a crash or std::bad_alloc.
constexpr int64_t kMaxWidth = int64_t{1} << 14;          // model_dim, head_dim
constexpr int64_t kMaxHidden = int64_t{1} << 16;         // mlp_hidden, mudd_hidden
constexpr int64_t kMaxHeads = int64_t{1} << 10;
constexpr int64_t kMaxVocab = int64_t{1} << 17;          // token ids are 16-bit; padding beyond is useless
constexpr int64_t kMaxBigramRows = int64_t{1} << 24;
constexpr int64_t kMaxMatrixElements = int64_t{1} << 32;  // one weight matrix: 8 GiB in bf16
constexpr int64_t kMaxSteps = int64_t{1} << 30;           // per key; scheduled + extension < 2^31
constexpr int64_t kMaxTokens = int64_t{1} << 30;          // batch_tokens, lmax, validation.batch_tokens
constexpr int64_t kMaxValidationTokens = int64_t{1} << 40;
constexpr int64_t kMaxBlocks = int64_t{1} << 16;          // window_block and windows in blocks
constexpr int64_t kMaxRows = int64_t{1} << 24;            // validation.cu_rows
constexpr size_t kMaxStages = 64;
constexpr size_t kMaxMtpWeights = 64;
constexpr size_t kMaxStepParts = 64;           // entries of a stage's prefix_steps / sampled_softmax
// §S.4: P is a multiple of 2048 [NR]; the scaled-down recipes keep that rule (tiny-seed uses 2048 and 4096).
constexpr int64_t kSampledSoftmaxQuantum = 2048;

// a × b must not exceed `limit` (checked without overflow); the message names both keys.
void check_product(const std::string& source, const std::string& key_a, int64_t a, const std::string& key_b, int64_t b,
                   int64_t limit) {
  int64_t product = 0;
  const bool overflow = __builtin_mul_overflow(a, b, &product);
  GPT_CHECK(!overflow && product <= limit, "recipe ", source, ": ", key_a, " × ", key_b, " = ", a, " × ", b,
            " exceeds ", limit);
}

// Parameter names of the fixed topology (§2, §4.5): a table under optimizer.adam / optimizer.banks for any other
// name configures nothing, which is a typo to report rather than ignore.
constexpr std::array<std::string_view, 16> kAdamParameters = {
    "embed",        "lm_head",      "value_embeds", "bigram_embed", "ve_gate_bank", "scalars",
    "smear_gate",   "post_lambdas", "resid_lambdas", "mudd_w1",     "mudd_w2",      "mudd_b2",
    "mudd_gate_w1", "mudd_gate_w2", "mudd_gate_b2", "_mudd_gate_scale"};
constexpr std::array<std::string_view, 3> kBankParameters = {"qk_bank", "vo_bank", "mlp_bank"};

template <size_t N>
void check_parameter_name(const std::string& source, const char* table, const std::string& name,
                          const std::array<std::string_view, N>& known) {
  if (std::find(known.begin(), known.end(), name) != known.end()) return;
  std::string list;
  for (const std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
  GPT_FAIL("recipe ", source, ": unknown table '", table, ".", name, "' (no such parameter; expected one of ", list,
           ")");
}

StageConfig read_stage(Reader r) {
  StageConfig s;
  s.batch_tokens = r.integer("batch_tokens", 1, kMaxTokens);
  s.lmax = r.integer("lmax", 1, kMaxTokens);
  s.ws_short = r.integer("ws_short", 1, kMaxBlocks);
  s.ws_long = r.integer("ws_long", 1, kMaxBlocks);
  s.lr_mul = r.number("lr_mul", 0, 1e6);
  s.mtp_start = r.numbers("mtp_start", 0, 1e6);
  s.mtp_end = r.numbers("mtp_end", 0, 1e6);
  s.prefix_start = r.number("prefix_start", 0, 1e6);
  s.prefix_end = r.number("prefix_end", 0, 1e6);
  GPT_CHECK(!s.mtp_start.empty() && s.mtp_start.size() == s.mtp_end.size() && s.mtp_start.size() <= kMaxMtpWeights,
            "recipe ", r.source(), ": keys '", r.full("mtp_start"), "' and '", r.full("mtp_end"),
            "' must be non-empty lists of equal length (at most ", kMaxMtpWeights, ")");
  // §S.1 / §S.4 stepped lists (optional; empty = interpolated prefix weight, full softmax).
  if (r.has("prefix_steps")) {
    s.prefix_steps = r.numbers("prefix_steps", 0, 1e6);
    GPT_CHECK(!s.prefix_steps.empty() && s.prefix_steps.size() <= kMaxStepParts, "recipe ", r.source(), ": key '",
              r.full("prefix_steps"), "' must hold 1 to ", kMaxStepParts, " weights (or be left out)");
  }
  if (r.has("sampled_softmax")) {
    s.sampled_softmax = r.integers("sampled_softmax", 0, kMaxVocab);
    GPT_CHECK(!s.sampled_softmax.empty() && s.sampled_softmax.size() <= kMaxStepParts, "recipe ", r.source(),
              ": key '", r.full("sampled_softmax"), "' must hold 1 to ", kMaxStepParts, " sizes (or be left out)");
    for (int64_t p : s.sampled_softmax) {
      GPT_CHECK(p % kSampledSoftmaxQuantum == 0, "recipe ", r.source(), ": key '", r.full("sampled_softmax"),
                "' entries must be 0 (full softmax) or a positive multiple of ", kSampledSoftmaxQuantum, ", got ", p);
    }
  }
  r.finish();
  return s;
}

// §S checks that need more than the [seed] table: sampled-softmax sizes against the vocabulary, the n-gram row cache
// against the largest reads, the cadence switch against the table.
void check_seed_against_recipe(const Recipe& rc, const std::string& source) {
  for (size_t i = 0; i < rc.schedule.stages.size(); ++i) {
    for (int64_t p : rc.schedule.stages[i].sampled_softmax) {
      GPT_CHECK(p <= rc.model.vocab_size, "recipe ", source, ": schedule.stages.", i, ".sampled_softmax entry ", p,
                " exceeds model.vocab_size (", rc.model.vocab_size, ")");
    }
  }
  const SeedConfig& sd = rc.seed;
  GPT_CHECK(!sd.value_embeds_on_cadence || sd.ngram_rows > 0, "recipe ", source,
            ": seed.value_embeds_on_cadence = true needs the n-gram table's cadence (seed.ngram_rows > 0)");
  if (sd.ngram_rows == 0) return;
  // A cycle reads at most max_cycle_steps slices of the largest T (two row ids per token), a validation forward
  // two ids per token of its batch (§S.2 placement: capacity ≥ 2·4·T).
  int64_t max_slice = 0;
  for (const StageConfig& st : rc.schedule.stages) max_slice = std::max(max_slice, st.batch_tokens / rc.slices_per_call);
  const int64_t cycle_steps = std::max<int64_t>(2, sd.ngram_max_cycle_steps);
  const int64_t need = std::max(2 * cycle_steps * max_slice, 2 * rc.validation.batch_tokens);
  GPT_CHECK(sd.ngram_cache_rows >= need, "recipe ", source, ": seed.ngram_cache_rows (", sd.ngram_cache_rows,
            ") must hold at least ", need, " rows (2 ids per token × max(",
            cycle_steps, " cycle steps × the largest slice of ", max_slice, " tokens, validation.batch_tokens))");
}

Recipe read_recipe(const toml::table& tree, const std::string& name, const std::string& source,
                   const recipe_detail::Overrides& overrides) {
  Reader root(tree, "", source, &overrides);
  Recipe rc;
  rc.name = name;
  {
    Reader m = root.table("model");
    rc.model.model_dim = m.integer("model_dim", 1, kMaxWidth);
    rc.model.num_heads = m.integer("num_heads", 1, kMaxHeads);
    rc.model.head_dim = m.integer("head_dim", 4, kMaxWidth);
    rc.model.num_layers = m.integer("num_layers", 11, 11);
    rc.model.mlp_hidden = m.integer("mlp_hidden", 1, kMaxHidden);
    rc.model.mudd_hidden = m.integer("mudd_hidden", 1, kMaxHidden);
    rc.model.vocab_size = m.integer("vocab_size", 50257, kMaxVocab);
    rc.model.bigram_rows = m.integer("bigram_rows", 2, kMaxBigramRows);
    rc.model.init_bound = m.number("init_bound", 0, 1);
    rc.model.rotary_base = m.number("rotary_base", 1, 1e9);
    m.finish();
    GPT_CHECK(rc.model.num_heads * rc.model.head_dim == rc.model.model_dim, "recipe ", source,
              ": model.num_heads × model.head_dim must equal model.model_dim");
    GPT_CHECK(rc.model.head_dim % 4 == 0, "recipe ", source, ": model.head_dim must be a multiple of 4");
    const int64_t d = rc.model.model_dim;
    check_product(source, "model.bigram_rows", rc.model.bigram_rows, "model.model_dim", d, kMaxMatrixElements);
    check_product(source, "model.vocab_size", rc.model.vocab_size, "model.model_dim", d, kMaxMatrixElements);
    check_product(source, "model.mlp_hidden", rc.model.mlp_hidden, "model.model_dim", d, kMaxMatrixElements);
    check_product(source, "model.mudd_hidden", rc.model.mudd_hidden, "model.model_dim", d, kMaxMatrixElements);
    check_product(source, "model.model_dim", d, "model.model_dim", d, kMaxMatrixElements);
  }
  {
    Reader s = root.table("schedule");
    ScheduleConfig& sc = rc.schedule;
    sc.num_scheduled = s.integer("num_scheduled", 1, kMaxSteps);
    sc.num_extension = s.integer("num_extension", 0, kMaxSteps);
    sc.stage_durations = s.numbers("stage_durations", 1e-9, 1e9);
    GPT_CHECK(sc.stage_durations.size() < kMaxStages, "recipe ", source, ": schedule.stage_durations holds ",
              sc.stage_durations.size(), " entries, at most ", kMaxStages - 1, " are allowed");
    for (Reader st : s.tables("stages")) sc.stages.push_back(read_stage(st));
    sc.window_block = s.integer("window_block", 1, kMaxBlocks);
    sc.cooldown_frac = s.number("cooldown_frac", 0, 1);
    sc.lr_floor = s.number("lr_floor", 0, 1e6);
    sc.split_stage = s.integer("split_stage", 0, static_cast<int64_t>(kMaxStages));
    sc.momentum_warmup_steps = s.integer("momentum_warmup_steps", 0, kMaxSteps);
    sc.momentum_cooldown_steps = s.integer("momentum_cooldown_steps", 0, kMaxSteps);
    sc.momentum_min = s.number("momentum_min", 0, 1, true);
    sc.momentum_max = s.number("momentum_max", 0, 1, true);
    sc.final_ws_short = s.integer("final_ws_short", 1, kMaxBlocks);
    sc.final_ws_long = s.integer("final_ws_long", 1, kMaxBlocks);
    sc.cu_rows_multiplier = s.integer("cu_rows_multiplier", 1, 64);
    sc.warmup = s.boolean("warmup");
    // §S.1 (optional; defaults leave head's schedule unchanged).
    sc.growth_steps = s.integer_or("growth_steps", sc.growth_steps, 0, kMaxSteps);
    sc.growth_stage = s.integer_or("growth_stage", sc.growth_stage, 0, static_cast<int64_t>(kMaxStages));
    sc.segment_cap = s.integer_or("segment_cap", sc.segment_cap, 0, kMaxTokens);
    s.finish();
    const auto scheduled = static_cast<int64_t>(sc.stage_durations.size());
    GPT_CHECK(sc.growth_steps == 0 || sc.growth_stage < scheduled, "recipe ", source,
              ": schedule.growth_stage must name a scheduled stage in [0, ", scheduled, ") when schedule.growth_steps > 0, got ",
              sc.growth_stage);
    GPT_CHECK(sc.segment_cap % sc.window_block == 0, "recipe ", source, ": schedule.segment_cap (", sc.segment_cap,
              ") must be 0 (no cap) or a multiple of schedule.window_block (", sc.window_block, ")");
    GPT_CHECK(sc.stages.size() == sc.stage_durations.size() + 1, "recipe ", source,
              ": schedule.stages must hold one entry per schedule.stage_durations entry plus the extension (",
              sc.stage_durations.size() + 1, "), got ", sc.stages.size());
    GPT_CHECK(sc.split_stage < static_cast<int64_t>(sc.stages.size()), "recipe ", source,
              ": schedule.split_stage must name a stage in [0, ", sc.stages.size(), ")");
  }
  {
    Reader o = root.table("optimizer");
    OptimizerConfig& oc = rc.optimizer;
    oc.bank_lr = o.number("bank_lr", 0, 10);
    oc.bank_wd = o.number("bank_wd", 0, 1e3);
    oc.bank_beta2 = o.number("bank_beta2", 0, 1, true);
    oc.adam_lr = o.number("adam_lr", 0, 10);
    oc.adam_wd = o.number("adam_wd", 0, 1e3);
    oc.adam_eps = o.number("adam_eps", 0, 1);
    Reader groups = o.table("adam");
    for (const std::string& key : groups.keys()) {
      check_parameter_name(source, "optimizer.adam", key, kAdamParameters);
      Reader g = groups.table(key);
      AdamGroupConfig a;
      a.beta1 = g.number("beta1", 0, 1, true);
      a.beta2 = g.number("beta2", 0, 1, true);
      a.lr_mul = g.number("lr_mul", 0, 1e6);
      a.wd_mul = g.number("wd_mul", 0, 1e6);
      a.sharded = g.boolean("sharded");
      g.finish();
      oc.adam[key] = a;
    }
    groups.finish();
    Reader banks = o.table("banks");
    for (const std::string& key : banks.keys()) {
      check_parameter_name(source, "optimizer.banks", key, kBankParameters);
      Reader b = banks.table(key);
      oc.banks[key].odd_matrix_lr_mul = b.number("odd_matrix_lr_mul", 0, 1e6);
      b.finish();
    }
    banks.finish();
    o.finish();
  }
  {
    Reader v = root.table("validation");
    rc.validation.every = v.integer("every", 0, kMaxSteps);
    rc.validation.tokens = v.integer("tokens", 1, kMaxValidationTokens);
    rc.validation.batch_tokens = v.integer("batch_tokens", 1, kMaxTokens);
    rc.validation.cu_rows = v.integer("cu_rows", 2, kMaxRows);
    v.finish();
    GPT_CHECK(rc.validation.tokens % rc.validation.batch_tokens == 0, "recipe ", source,
              ": validation.tokens must be a multiple of validation.batch_tokens");
  }
  if (root.has("data")) {
    Reader d = root.table("data");
    rc.data.cycle_train_shards = d.boolean("cycle_train_shards");
    d.finish();
  }
  if (root.has("seed")) rc.seed = recipe_detail::read_seed_table(root.table("seed"));
  rc.slices_per_call = root.integer("slices_per_call", 1, 8);
  for (size_t i = 0; i < rc.schedule.stages.size(); ++i) {
    GPT_CHECK(rc.schedule.stages[i].batch_tokens % rc.slices_per_call == 0, "recipe ", source, ": schedule.stages.", i,
              ".batch_tokens must be a multiple of slices_per_call (", rc.slices_per_call, ")");
  }
  check_seed_against_recipe(rc, source);
  rc.fp8 = root.boolean("fp8");
  GPT_CHECK(!root.has("target_loss"), "recipe ", source,
            ": 'target_loss' moved to the [record] table: write [record] target = VALUE and source = \"where the "
            "target comes from\" (override it with --set record.target=VALUE)");
  {
    Reader r = root.table("record");
    rc.record.target = r.number("target", 0, 100);
    rc.record.source = r.text("source");
    r.finish();
  }
  root.finish();
  return rc;
}

toml::array to_array(const std::vector<double>& v) {
  toml::array a;
  for (double x : v) a.push_back(x);
  return a;
}

}  // namespace

std::string Recipe::canonical() const {
  toml::table model_t{{"model_dim", model.model_dim},     {"num_heads", model.num_heads},
                      {"head_dim", model.head_dim},       {"num_layers", model.num_layers},
                      {"mlp_hidden", model.mlp_hidden},   {"mudd_hidden", model.mudd_hidden},
                      {"vocab_size", model.vocab_size},   {"bigram_rows", model.bigram_rows},
                      {"init_bound", model.init_bound},   {"rotary_base", model.rotary_base}};
  toml::array stages_a;
  for (const StageConfig& s : schedule.stages) {
    toml::table stage{{"batch_tokens", s.batch_tokens}, {"lmax", s.lmax}, {"ws_short", s.ws_short},
                      {"ws_long", s.ws_long}, {"lr_mul", s.lr_mul}, {"mtp_start", to_array(s.mtp_start)},
                      {"mtp_end", to_array(s.mtp_end)}, {"prefix_start", s.prefix_start},
                      {"prefix_end", s.prefix_end}};
    // §S keys only when set, so recipes without them keep their hash.
    if (!s.prefix_steps.empty()) stage.insert("prefix_steps", to_array(s.prefix_steps));
    if (!s.sampled_softmax.empty()) {
      toml::array sizes;
      for (int64_t p : s.sampled_softmax) sizes.push_back(p);
      stage.insert("sampled_softmax", sizes);
    }
    stages_a.push_back(std::move(stage));
  }
  const ScheduleConfig& sc = schedule;
  toml::table schedule_t{{"num_scheduled", sc.num_scheduled},
                         {"num_extension", sc.num_extension},
                         {"stage_durations", to_array(sc.stage_durations)},
                         {"stages", stages_a},
                         {"window_block", sc.window_block},
                         {"cooldown_frac", sc.cooldown_frac},
                         {"lr_floor", sc.lr_floor},
                         {"split_stage", sc.split_stage},
                         {"momentum_warmup_steps", sc.momentum_warmup_steps},
                         {"momentum_cooldown_steps", sc.momentum_cooldown_steps},
                         {"momentum_min", sc.momentum_min},
                         {"momentum_max", sc.momentum_max},
                         {"final_ws_short", sc.final_ws_short},
                         {"final_ws_long", sc.final_ws_long},
                         {"cu_rows_multiplier", sc.cu_rows_multiplier},
                         {"warmup", sc.warmup}};
  const ScheduleConfig schedule_defaults;
  if (sc.growth_steps != schedule_defaults.growth_steps) schedule_t.insert("growth_steps", sc.growth_steps);
  if (sc.growth_stage != schedule_defaults.growth_stage) schedule_t.insert("growth_stage", sc.growth_stage);
  if (sc.segment_cap != schedule_defaults.segment_cap) schedule_t.insert("segment_cap", sc.segment_cap);
  toml::table adam_t, banks_t;
  for (const auto& [k, a] : optimizer.adam) {
    adam_t.insert(k, toml::table{{"beta1", a.beta1}, {"beta2", a.beta2}, {"lr_mul", a.lr_mul}, {"wd_mul", a.wd_mul},
                                 {"sharded", a.sharded}});
  }
  for (const auto& [k, b] : optimizer.banks) banks_t.insert(k, toml::table{{"odd_matrix_lr_mul", b.odd_matrix_lr_mul}});
  toml::table optimizer_t{{"bank_lr", optimizer.bank_lr}, {"bank_wd", optimizer.bank_wd},
                          {"bank_beta2", optimizer.bank_beta2}, {"adam_lr", optimizer.adam_lr},
                          {"adam_wd", optimizer.adam_wd}, {"adam_eps", optimizer.adam_eps},
                          {"adam", adam_t}, {"banks", banks_t}};
  toml::table validation_t{{"every", validation.every}, {"tokens", validation.tokens},
                           {"batch_tokens", validation.batch_tokens}, {"cu_rows", validation.cu_rows}};
  toml::table root{{"model", model_t},          {"schedule", schedule_t}, {"optimizer", optimizer_t},
                   {"validation", validation_t}, {"slices_per_call", slices_per_call}, {"fp8", fp8},
                   {"target_loss", record.target}};
  if (data != DataConfig{}) root.insert("data", toml::table{{"cycle_train_shards", data.cycle_train_shards}});
  if (seed != SeedConfig{}) root.insert("seed", recipe_detail::seed_canonical_table(seed));
  std::ostringstream os;
  os << toml::toml_formatter(root, toml::format_flags::none);
  return os.str();
}

std::string Recipe::hash() const {
  return fnv1a64_hex(canonical(), kFnv1a64StoredHashBasis);  // stored with every run: never changes
}

std::filesystem::path default_recipe_dir() { return std::filesystem::path(SPEEDRUN_SOURCE_DIR) / "trainer" / "recipes"; }

Recipe parse_recipe(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides, const std::filesystem::path& recipe_dir) {
  toml::table tree = load_tree(toml_text, source_name, recipe_dir, 0);
  recipe_detail::Overrides assignments;
  for (const std::string& o : overrides) {
    apply_override(tree, o, source_name);
    assignments[o.substr(0, o.find('='))] = o;  // a later --set of the same key wins, as in the tree
  }
  const std::string name = std::filesystem::path(source_name).stem().string();
  return read_recipe(tree, name, source_name, assignments);
}

Recipe load_recipe(const std::string& name_or_path, const std::vector<std::string>& overrides,
                   const std::filesystem::path& recipe_dir) {
  const std::filesystem::path path = resolve_recipe_path(name_or_path, recipe_dir);
  std::error_code ec;
  GPT_CHECK(std::filesystem::exists(path, ec), "recipe '", name_or_path, "' not found (looked for ", path.string(), ")");
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : recipe_dir;
  return parse_recipe(read_recipe_file(path, "recipe file"), path.string(), overrides, dir);
}

}  // namespace gpt
