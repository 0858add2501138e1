// The recipe schema (recipe_keys.h): every recipe key, declared once. Ranges are far above any real recipe where
// they only guard against overflow (see the limits in recipe_limits.h).
#include "trainer/recipe/recipe_keys.h"

#include <charconv>
#include <sstream>

#include "trainer/recipe/recipe_limits.h"

namespace gpt {

namespace {

using namespace recipe_limits;

// Field accessors: `field<&StageConfig::lmax>` for a member of the owner, `in<&Recipe::model, &ModelConfig::d>` for
// a member of one of its sections. Their addresses are the KeySpec::Field alternatives.
template <class M>
struct member_of;
template <class C, class T>
struct member_of<T C::*> {
  using owner = C;
  using type = T;
};
template <auto M>
typename member_of<decltype(M)>::type& field(typename member_of<decltype(M)>::owner& o) {
  return o.*M;
}
template <auto Section, auto M>
typename member_of<decltype(M)>::type& in(typename member_of<decltype(Section)>::owner& o) {
  return (o.*Section).*M;
}
template <auto M>
constexpr auto model = &in<&Recipe::model, M>;
template <auto M>
constexpr auto schedule = &in<&Recipe::schedule, M>;
template <auto M>
constexpr auto optimizer = &in<&Recipe::optimizer, M>;
template <auto M>
constexpr auto validation = &in<&Recipe::validation, M>;
template <auto M>
constexpr auto data = &in<&Recipe::data, M>;
template <auto M>
constexpr auto ext = &in<&Recipe::extensions, M>;
template <auto M>
constexpr auto record = &in<&Recipe::record, M>;

template <class Owner>
KeySpec<Owner> integer(std::string_view name, int64_t& (*f)(Owner&), int64_t lo, int64_t hi, std::string_view doc) {
  KeySpec<Owner> k{.name = name, .field = f, .doc = doc};
  k.int_lo = lo;
  k.int_hi = hi;
  return k;
}
template <class Owner>
KeySpec<Owner> integers(std::string_view name, std::vector<int64_t>& (*f)(Owner&), int64_t lo, int64_t hi,
                        std::string_view doc) {
  KeySpec<Owner> k{.name = name, .field = f, .doc = doc};
  k.int_lo = lo;
  k.int_hi = hi;
  return k;
}
// A number in [lo, hi]; `below` makes it [lo, hi), `above` (lo, hi].
enum class Bounds { closed, below, above };
template <class Owner>
KeySpec<Owner> number(std::string_view name, double& (*f)(Owner&), double lo, double hi, std::string_view doc,
                      Bounds bounds = Bounds::closed) {
  KeySpec<Owner> k{.name = name, .field = f, .doc = doc};
  k.lo = lo;
  k.hi = hi;
  k.open_hi = bounds == Bounds::below;
  k.open_lo = bounds == Bounds::above;
  return k;
}
template <class Owner>
KeySpec<Owner> numbers(std::string_view name, std::vector<double>& (*f)(Owner&), double lo, double hi,
                       std::string_view doc) {
  KeySpec<Owner> k{.name = name, .field = f, .doc = doc};
  k.lo = lo;
  k.hi = hi;
  return k;
}
template <class Owner>
KeySpec<Owner> boolean(std::string_view name, bool& (*f)(Owner&), std::string_view doc) {
  return KeySpec<Owner>{.name = name, .field = f, .doc = doc};
}
template <class Owner>
KeySpec<Owner> text(std::string_view name, std::string& (*f)(Owner&), std::vector<std::string_view> choices,
                    std::string_view doc) {
  return KeySpec<Owner>{.name = name, .field = f, .choices = std::move(choices), .doc = doc};
}

// An [extensions] key: optional, and spelled `seed.KEY` in the canonical text (the table's name when the §S recipes'
// hashes were recorded).
template <class Spec>
Spec extension(Spec k, std::string_view canonical_spelling) {
  return k.optional_key().canonical_as(canonical_spelling);
}

using C = ExtensionsConfig;
using M = ModelConfig;
using S = ScheduleConfig;
using O = OptimizerConfig;
using V = ValidationConfig;

}  // namespace

const std::vector<KeySpec<Recipe>>& recipe_keys() {
  static const std::vector<KeySpec<Recipe>> keys = {
      integer("slices_per_call", &field<&Recipe::slices_per_call>, 1, 8,
              "slices per loader call (§1.3); T = B / slices_per_call"),
      boolean("fp8", &field<&Recipe::fp8>, "§7.2 MLP FP8 (the lm_head loss of §7.1 is always FP8)"),
      integer("model.model_dim", model<&M::model_dim>, 1, kMaxWidth, "d, the residual width"),
      integer("model.num_heads", model<&M::num_heads>, 1, kMaxHeads, "H; H × head_dim = model_dim"),
      integer("model.head_dim", model<&M::head_dim>, 4, kMaxWidth, "Dh, a multiple of 4 (F = Dh/4 frequencies)"),
      integer("model.num_layers", model<&M::num_layers>, 11, 11, "L: the topology of §2.1 is fixed"),
      integer("model.mlp_hidden", model<&M::mlp_hidden>, 1, kMaxHidden, "MLP hidden width (4d)"),
      integer("model.mudd_hidden", model<&M::mudd_hidden>, 1, kMaxHidden, "hidden width of the MUDD MLPs (§2.6, §2.7)"),
      integer("model.vocab_size", model<&M::vocab_size>, 50257, kMaxVocab, "padded vocabulary V"),
      integer("model.bigram_rows", model<&M::bigram_rows>, 2, kMaxBigramRows, "rows of bigram_embed (M = rows − 1)"),
      number("model.init_bound", model<&M::init_bound>, 0, 1, "bank init U(−bound, bound)"),
      number("model.rotary_base", model<&M::rotary_base>, 1, 1e9, "ω_k = base^(−k/(F−1))"),
      integer("schedule.num_scheduled", schedule<&S::num_scheduled>, 1, kMaxSteps,
              "steps of the scheduled stages (all but the extension stage)"),
      integer("schedule.num_extension", schedule<&S::num_extension>, 0, kMaxSteps, "steps of the extension stage"),
      numbers("schedule.stage_durations", schedule<&S::stage_durations>, 1e-9, 1e9,
              "relative durations of the scheduled stages"),
      integer("schedule.window_block", schedule<&S::window_block>, 1, kMaxBlocks, "tokens per window block"),
      number("schedule.cooldown_frac", schedule<&S::cooldown_frac>, 0, 1,
             "η decays over the last cooldown_frac of the scheduled steps"),
      number("schedule.lr_floor", schedule<&S::lr_floor>, 0, 1e6, "η at the end of the cooldown"),
      integer("schedule.split_stage", schedule<&S::split_stage>, 0, static_cast<int64_t>(kMaxStages),
              "embed/lm_head split at stage_start(split_stage) | 1 (§4.6)"),
      integer("schedule.momentum_warmup_steps", schedule<&S::momentum_warmup_steps>, 0, kMaxSteps,
              "μ ramps 0.85 → 0.95 over these steps"),
      integer("schedule.momentum_cooldown_steps", schedule<&S::momentum_cooldown_steps>, 0, kMaxSteps,
              "μ falls back over the last steps"),
      number("schedule.momentum_min", schedule<&S::momentum_min>, 0, 1, "NorMuon momentum at the ends", Bounds::below),
      number("schedule.momentum_max", schedule<&S::momentum_max>, 0, 1, "NorMuon momentum in between", Bounds::below),
      integer("schedule.final_ws_short", schedule<&S::final_ws_short>, 1, kMaxBlocks,
              "short window of the final validation (§5.5), in blocks"),
      integer("schedule.final_ws_long", schedule<&S::final_ws_long>, 1, kMaxBlocks,
              "long window of the final validation (§5.5), in blocks"),
      integer("schedule.cu_rows_multiplier", schedule<&S::cu_rows_multiplier>, 1, 64,
              "[project definition] R of a training slice = §1.4's R × this (corpora of short documents)"),
      boolean("schedule.warmup", schedule<&S::warmup>,
              "§9.1 warmup and reset before the timed run ([project definition] false on the CPU)"),
      integer("schedule.growth_steps", schedule<&S::growth_steps>, 0, kMaxSteps,
              "§S.1 steps added to every stage end from growth_stage on")
          .optional_key(),
      integer("schedule.growth_stage", schedule<&S::growth_stage>, 0, static_cast<int64_t>(kMaxStages),
              "§S.1 first stage whose end grows")
          .optional_key(),
      integer("schedule.segment_cap", schedule<&S::segment_cap>, 0, kMaxTokens,
              "§S.1 attention segment cap in tokens (0 = none; a multiple of window_block)")
          .optional_key(),
      number("optimizer.bank_lr", optimizer<&O::bank_lr>, 0, 10, "NorMuon learning rate (§4.2)"),
      number("optimizer.bank_wd", optimizer<&O::bank_wd>, 0, 1e3, "NorMuon weight decay (§4.3)"),
      number("optimizer.bank_beta2", optimizer<&O::bank_beta2>, 0, 1, "NorMuon second-moment decay", Bounds::below),
      number("optimizer.adam_lr", optimizer<&O::adam_lr>, 0, 10, "Adam learning rate (§4.5)"),
      number("optimizer.adam_wd", optimizer<&O::adam_wd>, 0, 1e3, "Adam weight decay"),
      number("optimizer.adam_eps", optimizer<&O::adam_eps>, 0, 1, "Adam ε"),
      integer("validation.every", validation<&V::every>, 0, kMaxSteps, "validate at multiples of this (0: at the end)"),
      integer("validation.tokens", validation<&V::tokens>, 1, kMaxValidationTokens,
              "tokens per validation (a multiple of batch_tokens)"),
      integer("validation.batch_tokens", validation<&V::batch_tokens>, 1, kMaxTokens,
              "Tv: tokens per forward per rank"),
      integer("validation.cu_rows", validation<&V::cu_rows>, 2, kMaxRows, "cu_seqlens rows of a validation forward"),
      boolean("data.cycle_train_shards", data<&DataConfig::cycle_train_shards>,
              "[project definition] restart the train shards when they run out (proxy corpora only)")
          .optional_key(),
      extension(integer("extensions.ngram_rows", ext<&C::ngram_rows>, 0, kMaxNgramRows,
                        "§S.2 hashed n-gram table rows (0 = off: bigram_embed; else a multiple of 8, ≥ 16)"),
                "seed.ngram_rows"),
      extension(integer("extensions.ngram_late_step", ext<&C::ngram_late_step>, 0, kMaxSteps,
                        "§S.2 cadence: odd steps before it, s mod max_cycle = max_cycle − 1 from it"),
                "seed.ngram_late_step"),
      extension(integer("extensions.ngram_max_cycle_steps", ext<&C::ngram_max_cycle_steps>, 1, 64,
                        "§S.2 steps per table cycle from ngram_late_step on"),
                "seed.ngram_max_cycle_steps"),
      extension(number("extensions.ngram_lr", ext<&C::ngram_lr>, 0, 10, "§S.2 table Adam learning rate"),
                "seed.ngram_lr"),
      extension(number("extensions.ngram_lr_mul", ext<&C::ngram_lr_mul>, 0, 1e6, "§S.2 table lr multiplier"),
                "seed.ngram_lr_mul"),
      extension(number("extensions.ngram_wd", ext<&C::ngram_wd>, 0, 1e3, "§S.2 table weight decay"), "seed.ngram_wd"),
      extension(number("extensions.ngram_eps", ext<&C::ngram_eps>, 0, 1, "§S.2 table Adam ε"), "seed.ngram_eps"),
      extension(number("extensions.ngram_beta2", ext<&C::ngram_beta2>, 0, 1,
                       "§S.2 table β2 before ngram_late_step (its square from then on)", Bounds::below),
                "seed.ngram_beta2"),
      extension(number("extensions.ngram_wd_mul_early", ext<&C::ngram_wd_mul_early>, 0, 1e6,
                       "§S.2 wd multiplier before ngram_late_step"),
                "seed.ngram_wd_mul_early"),
      extension(number("extensions.ngram_wd_mul_late", ext<&C::ngram_wd_mul_late>, 0, 1e6,
                       "§S.2 wd multiplier from ngram_late_step on"),
                "seed.ngram_wd_mul_late"),
      extension(integer("extensions.ngram_cache_rows", ext<&C::ngram_cache_rows>, 1, kMaxCacheRows,
                        "§S.2 W > 1 row cache capacity per rank"),
                "seed.ngram_cache_rows"),
      extension(boolean("extensions.value_embeds_on_cadence", ext<&C::value_embeds_on_cadence>,
                        "§S.3 value_embeds updated at the n-gram events (needs ngram_rows > 0)"),
                "seed.value_embeds_on_cadence"),
      extension(boolean("extensions.tail_average", ext<&C::tail_average>,
                        "§S.5 tail averaging, shipped at the final validation"),
                "seed.tail_average"),
      extension(integer("extensions.tail_ema_window", ext<&C::tail_ema_window>, 1, kMaxSteps, "§S.5 tail-ema steps"),
                "seed.tail_ema_window"),
      extension(integer("extensions.tail_avg_window", ext<&C::tail_avg_window>, 1, kMaxSteps, "§S.5 tail-avg steps"),
                "seed.tail_avg_window"),
      extension(integer("extensions.value_embed_avg_window", ext<&C::value_embed_avg_window>, 1, kMaxSteps,
                        "§S.5 value-embed average steps"),
                "seed.value_embed_avg_window"),
      extension(
          integer("extensions.bank_blend_window", ext<&C::bank_blend_window>, 1, kMaxSteps, "§S.5 bank-blend steps"),
          "seed.bank_blend_window"),
      extension(
          number("extensions.tail_ema_rate", ext<&C::tail_ema_rate>, 0, 1, "§S.5 tail-ema lerp rate", Bounds::above),
          "seed.tail_ema_rate"),
      extension(
          number("extensions.tail_avg_rate", ext<&C::tail_avg_rate>, 0, 1, "§S.5 tail-avg lerp rate", Bounds::above),
          "seed.tail_avg_rate"),
      extension(number("extensions.bank_blend_rate", ext<&C::bank_blend_rate>, 0, 1, "§S.5 bank-blend lerp rate",
                       Bounds::above),
                "seed.bank_blend_rate"),
      extension(integer("extensions.tail_avg_every", ext<&C::tail_avg_every>, 1, kMaxSteps,
                        "§S.5 tail-avg fires when (N−1−s) mod this = 0"),
                "seed.tail_avg_every"),
      extension(integer("extensions.bank_blend_every", ext<&C::bank_blend_every>, 1, kMaxSteps,
                        "§S.5 bank-blend fires when s mod this = 1 or s ≥ N−2"),
                "seed.bank_blend_every"),
      extension(number("extensions.tail_ema_ship", ext<&C::tail_ema_ship>, 0, 1, "§S.5 tail-ema weight shipped"),
                "seed.tail_ema_ship"),
      extension(number("extensions.bank_blend_ship_qk", ext<&C::bank_blend_ship_qk>, 0, 1,
                       "§S.5 bank-blend weight shipped for qk_bank"),
                "seed.bank_blend_ship_qk"),
      extension(number("extensions.bank_blend_ship", ext<&C::bank_blend_ship>, 0, 1,
                       "§S.5 bank-blend weight shipped for the other banks"),
                "seed.bank_blend_ship"),
      extension(text("extensions.canonical_mask", ext<&C::canonical_mask>, {"off", "tier0", "tier1"},
                     "§S.6 canonical mask at the final validation"),
                "seed.canonical_mask"),
      extension(
          boolean("extensions.prefix_bucketed", ext<&C::prefix_bucketed>, "§S.7 prefix table inside the timed region"),
          "seed.prefix_bucketed"),
      extension(text("extensions.bank_opt", ext<&C::bank_opt>, {"normuon", "anvil"}, "§S.8 bank optimizer"),
                "seed.bank_opt"),
      extension(integer("extensions.anvil_rail_warmup", ext<&C::anvil_rail_warmup>, 0, kMaxSteps,
                        "§S.8 ANVIL rail warmup steps"),
                "seed.anvil_rail_warmup"),
      extension(integer("extensions.anvil_fast_switch", ext<&C::anvil_fast_switch>, 0, kMaxSteps,
                        "§S.8 step of the switch to the fast rail"),
                "seed.anvil_fast_switch"),
      extension(integer("extensions.anvil_rail_taper", ext<&C::anvil_rail_taper>, 0, kMaxSteps,
                        "§S.8 ANVIL rail taper steps"),
                "seed.anvil_rail_taper"),
      extension(number("extensions.anvil_fast_weight", ext<&C::anvil_fast_weight>, 0, 1, "§S.8 fast-rail weight"),
                "seed.anvil_fast_weight"),
      extension(number("extensions.anvil_wd", ext<&C::anvil_wd>, 0, 1e3, "§S.8 ANVIL weight decay"), "seed.anvil_wd"),
      extension(integer("extensions.log_every", ext<&C::log_every>, 1, kMaxSteps,
                        "§S.11 training lines when (s+1) mod this = 0 or s+1 ≥ N−1"),
                "seed.log_every"),
      extension(boolean("extensions.warmup_list", ext<&C::warmup_list>,
                        "§S.10 warmup step list (stage starts, P changes, split+1..3) instead of §9.1's"),
                "seed.seed_warmup"),
      number("record.target", record<&RecordTarget::target>, 0, 100,
             "record check: the runs' mean final val loss must be below it (§6)")
          .canonical_as("target_loss"),
      text("record.source", record<&RecordTarget::source>, {}, "where the target comes from (prose)")
          .not_in_canonical(),
  };
  return keys;
}

const std::vector<KeySpec<StageConfig>>& stage_keys() {
  using St = StageConfig;
  static const std::vector<KeySpec<StageConfig>> keys = {
      integer("batch_tokens", &field<&St::batch_tokens>, 1, kMaxTokens,
              "B: tokens per optimizer step over all slices (a multiple of slices_per_call)"),
      integer("lmax", &field<&St::lmax>, 1, kMaxTokens, "maximum document length"),
      integer("ws_short", &field<&St::ws_short>, 1, kMaxBlocks, "short window in blocks"),
      integer("ws_long", &field<&St::ws_long>, 1, kMaxBlocks, "long window in blocks"),
      number("lr_mul", &field<&St::lr_mul>, 0, 1e6, "learning-rate multiplier of the stage"),
      numbers("mtp_start", &field<&St::mtp_start>, 0, 1e6, "MTP weights at the stage start (1 to 64)"),
      numbers("mtp_end", &field<&St::mtp_end>, 0, 1e6, "MTP weights at the stage end (as many as mtp_start)"),
      number("prefix_start", &field<&St::prefix_start>, 0, 1e6, "prefix weight at the stage start"),
      number("prefix_end", &field<&St::prefix_end>, 0, 1e6, "prefix weight at the stage end"),
      numbers("prefix_steps", &field<&St::prefix_steps>, 0, 1e6,
              "§S.1 stepped prefix weight, one per equal part of the stage (1 to 64; replaces start/end)")
          .optional_key(),
      integers("sampled_softmax", &field<&St::sampled_softmax>, 0, kMaxVocab,
               "§S.4 sampled-softmax P per equal part (1 to 64; 0 = full; multiples of 2048, ≤ vocab_size)")
          .optional_key(),
  };
  return keys;
}

const std::vector<KeySpec<AdamGroupConfig>>& adam_group_keys() {
  using A = AdamGroupConfig;
  static const std::vector<KeySpec<AdamGroupConfig>> keys = {
      number("beta1", &field<&A::beta1>, 0, 1, "Adam β1 of the parameter", Bounds::below),
      number("beta2", &field<&A::beta2>, 0, 1, "Adam β2", Bounds::below),
      number("lr_mul", &field<&A::lr_mul>, 0, 1e6, "multiplier of optimizer.adam_lr"),
      number("wd_mul", &field<&A::wd_mul>, 0, 1e6, "multiplier of optimizer.adam_wd"),
      boolean("sharded", &field<&A::sharded>, "reduce-scatter rows (true) or all-reduce (false) when W > 1"),
  };
  return keys;
}

const std::vector<KeySpec<BankConfig>>& bank_keys() {
  static const std::vector<KeySpec<BankConfig>> keys = {
      number("odd_matrix_lr_mul", &field<&BankConfig::odd_matrix_lr_mul>, 0, 1e6,
             "lr multiplier of the bank's odd global matrix indices (2 for mlp_bank's W2)"),
  };
  return keys;
}

const std::vector<RenamedName>& renamed_recipe_keys() {
  // `seed` named both the §S profile and the RNG seed (`--seed`); the profile's table is now [extensions].
  static const std::vector<RenamedName> names = {{"seed", "extensions", true},
                                                 {"extensions.seed_warmup", "extensions.warmup_list"}};
  return names;
}

const std::vector<RenamedName>& renamed_recipes() {
  static const std::vector<RenamedName> names = {{"seed", "ext"}, {"mini-seed", "mini-ext"}, {"tiny-seed", "tiny-ext"}};
  return names;
}

// ---- the Markdown key table --------------------------------------------------------------------------------------

namespace {

std::string format_integer(int64_t v) {
  // Powers of two from 2^10 on read better as such (the size limits).
  if (v >= 1024 && (v & (v - 1)) == 0) return "2^" + std::to_string(__builtin_ctzll(static_cast<uint64_t>(v)));
  return std::to_string(v);
}

std::string format_number(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc{} ? std::string(buf, end) : std::to_string(v);
}

template <class T>
std::string format_list(const std::vector<T>& values, std::string (*format)(T)) {
  std::string out = "[";
  for (const T& v : values) out += (out.size() > 1 ? ", " : "") + format(v);
  return out + "]";
}

struct Row {
  std::string type, range, fallback;
};

template <class Owner>
Row describe(const KeySpec<Owner>& k) {
  Owner defaults{};
  const std::string int_range = "[" + format_integer(k.int_lo) + ", " + format_integer(k.int_hi) + "]";
  const std::string number_range =
      std::string(k.open_lo ? "(" : "[") + format_number(k.lo) + ", " + format_number(k.hi) + (k.open_hi ? ")" : "]");
  return std::visit(
      [&](auto get) -> Row {
        const auto& value = get(defaults);
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return {"integer", int_range, format_integer(value)};
        } else if constexpr (std::is_same_v<T, double>) {
          return {"number", number_range, format_number(value)};
        } else if constexpr (std::is_same_v<T, bool>) {
          return {"boolean", "true, false", value ? "true" : "false"};
        } else if constexpr (std::is_same_v<T, std::string>) {
          std::string list;
          for (std::string_view c : k.choices) list += (list.empty() ? "`" : " \\| `") + std::string(c) + "`";
          return {k.choices.empty() ? "string" : "choice", k.choices.empty() ? "non-empty" : list,
                  "`\"" + value + "\"`"};
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          return {"list of numbers", number_range, format_list<double>(value, &format_number)};
        } else {
          return {"list of integers", int_range, format_list<int64_t>(value, &format_integer)};
        }
      },
      k.field);
}

// A table cell: '|' would end it.
std::string cell(std::string_view text) {
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

template <class Owner>
void write_rows(std::ostream& os, const std::vector<KeySpec<Owner>>& keys, std::string_view prefix) {
  for (const KeySpec<Owner>& k : keys) {
    const Row row = describe(k);
    std::string canonical = k.canonical == InCanonical::always         ? "always"
                            : k.canonical == InCanonical::when_changed ? "if not default"
                                                                       : "never";
    if (!k.canonical_name.empty()) canonical += " (as `" + std::string(k.canonical_name) + "`)";
    os << "| `" << prefix << k.name << "` | " << row.type << " | " << row.range << " | "
       << (k.optional ? row.fallback : "required") << " | " << canonical << " | " << cell(k.doc) << " |\n";
  }
}

}  // namespace

std::string recipe_key_table_markdown() {
  std::ostringstream os;
  os << "| key | type | range | default | in canonical text | meaning |\n";
  os << "|---|---|---|---|---|---|\n";
  write_rows(os, recipe_keys(), "");
  write_rows(os, stage_keys(), kStageList.path() + ".N.");
  write_rows(os, adam_group_keys(), kAdamGroups.path() + ".PARAMETER.");
  write_rows(os, bank_keys(), kBankTables.path() + ".PARAMETER.");
  return os.str();
}

}  // namespace gpt
