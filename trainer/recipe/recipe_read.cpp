// Reading a recipe tree against the schema (recipe_keys.h) and the checks that relate several keys; the canonical
// text is recipe_canonical.cpp's. The keys themselves (types, ranges, defaults, canonical rules) are declared only in
// recipe_keys.cpp.
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <map>
#include <sstream>
#include <type_traits>

#include "trainer/recipe/recipe_keys.h"
#include "trainer/recipe/recipe_limits.h"
#include "trainer/recipe/toml_reader.h"

namespace gpt {

namespace recipe_detail {

namespace {

using namespace recipe_limits;

// ---- reading -----------------------------------------------------------------------------------------------------

// The Readers of one table and of its sub-tables named by dotted keys ("model.model_dim" reads [model]), each
// opened once so that finish() can reject the keys no declaration asked for.
class TableReaders {
 public:
  explicit TableReaders(Reader top) : top_(std::move(top)) {}

  // The Reader of `table` ("" = the top), or nullptr when an optional key's table is absent.
  Reader* open(const std::string& table, bool optional) {
    if (table.empty()) return &top_;
    if (const auto it = tables_.find(table); it != tables_.end()) return &it->second;
    if (optional && !top_.has(table)) return nullptr;
    return &tables_.emplace(table, top_.table(table)).first->second;
  }
  Reader& top() { return top_; }

  void finish() {
    for (auto& [name, reader] : tables_) reader.finish();
    top_.finish();
  }

 private:
  Reader top_;
  std::map<std::string, Reader> tables_;
};

template <class Owner>
void read_key(Reader& r, const std::string& leaf, const KeySpec<Owner>& k, Owner& out) {
  if (k.optional && !r.has(leaf)) return;  // the default of Owner{} stays
  std::visit(
      [&](auto get) {
        auto& dst = get(out);
        using T = std::decay_t<decltype(dst)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          dst = r.integer(leaf, k.int_lo, k.int_hi);
        } else if constexpr (std::is_same_v<T, double>) {
          dst = r.number(leaf, k.lo, k.hi, k.open_hi, k.open_lo);
        } else if constexpr (std::is_same_v<T, bool>) {
          dst = r.boolean(leaf);
        } else if constexpr (std::is_same_v<T, std::string>) {
          dst = k.choices.empty() ? r.text(leaf) : r.choice(leaf, k.choices);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          dst = r.numbers(leaf, k.lo, k.hi);
        } else {
          dst = r.integers(leaf, k.int_lo, k.int_hi);
        }
      },
      k.field);
}

// Reads every declared key of `Owner` from `tables` (names with a dot read the sub-table before it).
template <class Owner>
void read_keys(TableReaders& tables, const std::vector<KeySpec<Owner>>& keys, Owner& out) {
  for (const KeySpec<Owner>& k : keys) {
    const size_t dot = k.name.rfind('.');
    const std::string table = dot == std::string_view::npos ? "" : std::string(k.name.substr(0, dot));
    const std::string leaf(dot == std::string_view::npos ? k.name : k.name.substr(dot + 1));
    if (Reader* r = tables.open(table, k.optional)) read_key(*r, leaf, k, out);
  }
}

template <class Owner>
Owner read_entry(Reader r, const std::vector<KeySpec<Owner>>& keys) {
  Owner out{};
  TableReaders tables(std::move(r));
  read_keys(tables, keys, out);
  tables.finish();
  return out;
}

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
    "embed",        "lm_head",      "value_embeds",  "bigram_embed",    "ve_gate_bank", "scalars",
    "smear_gate",   "post_lambdas", "resid_lambdas", "mudd_w1",         "mudd_w2",      "mudd_b2",
    "mudd_gate_w1", "mudd_gate_w2", "mudd_gate_b2",  "_mudd_gate_scale"};
constexpr std::array<std::string_view, 3> kBankParameters = {"qk_bank", "vo_bank", "mlp_bank"};

template <size_t N>
void check_parameter_name(const std::string& source, const std::string& table, const std::string& name,
                          const std::array<std::string_view, N>& known) {
  if (std::find(known.begin(), known.end(), name) != known.end()) return;
  std::string list;
  for (const std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
  GPT_FAIL("recipe ", source, ": unknown table '", table, ".", name, "' (no such parameter; expected one of ", list,
           ")");
}

// The stage lists whose lengths the schema cannot state alone.
void check_stage(const StageConfig& s, const Reader& r) {
  GPT_CHECK(!s.mtp_start.empty() && s.mtp_start.size() == s.mtp_end.size() && s.mtp_start.size() <= kMaxMtpWeights,
            "recipe ", r.source(), ": keys '", r.full("mtp_start"), "' and '", r.full("mtp_end"),
            "' must be non-empty lists of equal length (at most ", kMaxMtpWeights, ")");
  // §S.1 / §S.4 stepped lists: present means 1 to kMaxStepParts entries (absent = interpolated prefix, full softmax).
  GPT_CHECK(!r.has("prefix_steps") || (!s.prefix_steps.empty() && s.prefix_steps.size() <= kMaxStepParts), "recipe ",
            r.source(), ": key '", r.full("prefix_steps"), "' must hold 1 to ", kMaxStepParts,
            " weights (or be left out)");
  GPT_CHECK(!r.has("sampled_softmax") || (!s.sampled_softmax.empty() && s.sampled_softmax.size() <= kMaxStepParts),
            "recipe ", r.source(), ": key '", r.full("sampled_softmax"), "' must hold 1 to ", kMaxStepParts,
            " sizes (or be left out)");
  for (int64_t p : s.sampled_softmax) {
    GPT_CHECK(p % kSampledSoftmaxQuantum == 0, "recipe ", r.source(), ": key '", r.full("sampled_softmax"),
              "' entries must be 0 (full softmax) or a positive multiple of ", kSampledSoftmaxQuantum, ", got ", p);
  }
}

void check_model(const ModelConfig& m, const std::string& source) {
  GPT_CHECK(m.num_heads * m.head_dim == m.model_dim, "recipe ", source,
            ": model.num_heads × model.head_dim must equal model.model_dim");
  GPT_CHECK(m.head_dim % 4 == 0, "recipe ", source, ": model.head_dim must be a multiple of 4");
  const int64_t d = m.model_dim;
  check_product(source, "model.bigram_rows", m.bigram_rows, "model.model_dim", d, kMaxMatrixElements);
  check_product(source, "model.vocab_size", m.vocab_size, "model.model_dim", d, kMaxMatrixElements);
  check_product(source, "model.mlp_hidden", m.mlp_hidden, "model.model_dim", d, kMaxMatrixElements);
  check_product(source, "model.mudd_hidden", m.mudd_hidden, "model.model_dim", d, kMaxMatrixElements);
  check_product(source, "model.model_dim", d, "model.model_dim", d, kMaxMatrixElements);
}

void check_schedule(const ScheduleConfig& sc, const std::string& source) {
  GPT_CHECK(sc.stage_durations.size() < kMaxStages, "recipe ", source, ": schedule.stage_durations holds ",
            sc.stage_durations.size(), " entries, at most ", kMaxStages - 1, " are allowed");
  const auto scheduled = static_cast<int64_t>(sc.stage_durations.size());
  GPT_CHECK(sc.growth_steps == 0 || sc.growth_stage < scheduled, "recipe ", source,
            ": schedule.growth_stage must name a scheduled stage in [0, ", scheduled,
            ") when schedule.growth_steps > 0, got ", sc.growth_stage);
  GPT_CHECK(sc.segment_cap % sc.window_block == 0, "recipe ", source, ": schedule.segment_cap (", sc.segment_cap,
            ") must be 0 (no cap) or a multiple of schedule.window_block (", sc.window_block, ")");
  GPT_CHECK(sc.stages.size() == sc.stage_durations.size() + 1, "recipe ", source, ": ", kStageList.path(),
            " must hold one entry per schedule.stage_durations entry plus the extension stage (",
            sc.stage_durations.size() + 1, "), got ", sc.stages.size());
  GPT_CHECK(sc.split_stage < static_cast<int64_t>(sc.stages.size()), "recipe ", source,
            ": schedule.split_stage must name a stage in [0, ", sc.stages.size(), ")");
}

// §S checks that need more than one key: the n-gram row count's shape, sampled-softmax sizes against the
// vocabulary, the n-gram row cache against the largest reads, the cadence switch against the table.
void check_extensions(const Recipe& rc, const std::string& source) {
  const ExtensionsConfig& ex = rc.extensions;
  // Two channels of equal size, each row range split evenly over up to 8 ranks.
  GPT_CHECK(ex.ngram_rows % 8 == 0 && ex.ngram_rows != 8, "recipe ", source,
            ": key 'extensions.ngram_rows' must be 0 (off) or a multiple of 8 of at least 16 (two channels, sharded "
            "over up to 8 ranks), got ",
            ex.ngram_rows);
  for (size_t i = 0; i < rc.schedule.stages.size(); ++i) {
    for (int64_t p : rc.schedule.stages[i].sampled_softmax) {
      GPT_CHECK(p <= rc.model.vocab_size, "recipe ", source, ": ", kStageList.path(), ".", i, ".sampled_softmax entry ",
                p, " exceeds model.vocab_size (", rc.model.vocab_size, ")");
    }
  }
  GPT_CHECK(!ex.value_embeds_on_cadence || ex.ngram_rows > 0, "recipe ", source,
            ": extensions.value_embeds_on_cadence = true needs the n-gram table's cadence (extensions.ngram_rows > 0)");
  if (ex.ngram_rows == 0) return;
  // A cycle reads at most max_cycle_steps slices of the largest T (two row ids per token), a validation forward
  // two ids per token of its batch (§S.2 placement: capacity ≥ 2·4·T).
  int64_t max_slice = 0;
  for (const StageConfig& st : rc.schedule.stages)
    max_slice = std::max(max_slice, st.batch_tokens / rc.slices_per_call);
  const int64_t cycle_steps = std::max<int64_t>(2, ex.ngram_max_cycle_steps);
  const int64_t need = std::max(2 * cycle_steps * max_slice, 2 * rc.validation.batch_tokens);
  GPT_CHECK(ex.ngram_cache_rows >= need, "recipe ", source, ": extensions.ngram_cache_rows (", ex.ngram_cache_rows,
            ") must hold at least ", need, " rows (2 ids per token × max(", cycle_steps,
            " cycle steps × the largest slice of ", max_slice, " tokens, validation.batch_tokens))");
}

// Old names (a [seed] table, …) are refused with the name that replaced them.
void refuse_renamed_keys(const toml::table& tree, const std::string& source) {
  for (const RenamedName& renamed : renamed_recipe_keys()) {
    const toml::node* node = tree.at_path(renamed.old_name).node();
    if (node == nullptr || (renamed.table && !node->is_table())) continue;
    if (renamed.table) {
      GPT_FAIL("recipe ", source, ": the [", renamed.old_name, "] table was renamed to [", renamed.new_name,
               "] (RECIPE §S extensions; `seed` is only the RNG seed, --seed)");
    }
    GPT_FAIL("recipe ", source, ": key '", renamed.old_name, "' was renamed to '", renamed.new_name, "'");
  }
  GPT_CHECK(!tree.contains("target_loss"), "recipe ", source,
            ": 'target_loss' moved to the [record] table: write [record] target = VALUE and source = \"where the "
            "target comes from\" (override it with --set record.target=VALUE)");
}

// The schema's full names of the optional keys, a stage's index written as "N" ("schedule.stages.N.prefix_steps").
std::vector<std::vector<std::string>> optional_key_paths() {
  std::vector<std::vector<std::string>> paths;
  auto add = [&paths](std::string prefix, std::string_view name) {
    std::vector<std::string> parts;
    std::string full = prefix + std::string(name);
    for (size_t b = 0;;) {
      const size_t e = full.find('.', b);
      parts.push_back(full.substr(b, e == std::string::npos ? std::string::npos : e - b));
      if (e == std::string::npos) break;
      b = e + 1;
    }
    paths.push_back(std::move(parts));
  };
  for (const auto& k : recipe_keys()) {
    if (k.optional) add("", k.name);
  }
  for (const auto& k : stage_keys()) {
    if (k.optional) add(kStageList.path() + ".N.", k.name);
  }
  return paths;
}

}  // namespace

bool may_create(const std::vector<std::string>& parts, size_t i) {
  static const std::vector<std::vector<std::string>> paths = optional_key_paths();
  return std::any_of(paths.begin(), paths.end(), [&](const std::vector<std::string>& path) {
    // A table on the way to an optional key, or the key itself (the whole path must then be that key).
    if (path.size() != parts.size()) return false;
    for (size_t j = 0; j <= i; ++j) {
      const bool index = path[j] == "N" && !parts[j].empty() &&
                         std::all_of(parts[j].begin(), parts[j].end(), [](char c) { return c >= '0' && c <= '9'; });
      if (path[j] != parts[j] && !index) return false;
    }
    return true;
  });
}

Recipe read_recipe(const toml::table& tree, const std::string& name, const std::string& source,
                   const Overrides& overrides) {
  refuse_renamed_keys(tree, source);
  Recipe rc;
  rc.name = name;
  TableReaders tables(Reader(tree, "", source, &overrides));
  read_keys(tables, recipe_keys(), rc);
  // The structurally different tables: the stage list and the per-parameter optimizer tables.
  for (Reader st : tables.open(std::string(kStageList.parent), false)->tables(std::string(kStageList.name))) {
    rc.schedule.stages.push_back(read_entry(st, stage_keys()));
    check_stage(rc.schedule.stages.back(), st);
  }
  static_assert(kAdamGroups.parent == kBankTables.parent, "one [optimizer] table holds both");
  Reader* optimizer = tables.open(std::string(kAdamGroups.parent), false);
  Reader groups = optimizer->table(std::string(kAdamGroups.name));
  for (const std::string& key : groups.keys()) {
    check_parameter_name(source, kAdamGroups.path(), key, kAdamParameters);
    rc.optimizer.adam[key] = read_entry(groups.table(key), adam_group_keys());
  }
  groups.finish();
  Reader banks = optimizer->table(std::string(kBankTables.name));
  for (const std::string& key : banks.keys()) {
    check_parameter_name(source, kBankTables.path(), key, kBankParameters);
    rc.optimizer.banks[key] = read_entry(banks.table(key), bank_keys());
  }
  banks.finish();
  tables.finish();

  check_model(rc.model, source);
  check_schedule(rc.schedule, source);
  GPT_CHECK(rc.validation.tokens % rc.validation.batch_tokens == 0, "recipe ", source,
            ": validation.tokens must be a multiple of validation.batch_tokens");
  for (size_t i = 0; i < rc.schedule.stages.size(); ++i) {
    GPT_CHECK(rc.schedule.stages[i].batch_tokens % rc.slices_per_call == 0, "recipe ", source, ": ", kStageList.path(),
              ".", i, ".batch_tokens must be a multiple of slices_per_call (", rc.slices_per_call, ")");
  }
  check_extensions(rc, source);
  return rc;
}

}  // namespace recipe_detail

}  // namespace gpt
