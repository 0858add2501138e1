// The [seed] table of a recipe (RECIPE §S): reading with validation, and its canonical form.
#include <toml++/toml.h>

#include "trainer/recipe/recipe_reader.h"

namespace gpt::recipe_detail {

namespace {

constexpr int64_t kMaxSteps = int64_t{1} << 30;
// Row ids are int32 (§S.2): the largest id, ngram_rows − 1, must fit. 2^30 also keeps every shard offset small.
constexpr int64_t kMaxNgramRows = int64_t{1} << 30;
constexpr int64_t kMaxCacheRows = int64_t{1} << 30;

}  // namespace

SeedConfig read_seed_table(Reader r) {
  const SeedConfig d;  // defaults: every key is optional
  SeedConfig c;
  c.ngram_rows = r.integer_or("ngram_rows", d.ngram_rows, 0, kMaxNgramRows);
  // Two channels of equal size, each row range split evenly over up to 8 ranks.
  GPT_CHECK(c.ngram_rows % 8 == 0 && c.ngram_rows != 8, "recipe ", r.source(), ": key '", r.full("ngram_rows"),
            "' must be 0 (off) or a multiple of 8 of at least 16 (two channels, sharded over up to 8 ranks), got ",
            c.ngram_rows);
  c.ngram_late_step = r.integer_or("ngram_late_step", d.ngram_late_step, 0, kMaxSteps);
  c.ngram_max_cycle_steps = r.integer_or("ngram_max_cycle_steps", d.ngram_max_cycle_steps, 1, 64);
  c.ngram_lr = r.number_or("ngram_lr", d.ngram_lr, 0, 10);
  c.ngram_lr_mul = r.number_or("ngram_lr_mul", d.ngram_lr_mul, 0, 1e6);
  c.ngram_wd = r.number_or("ngram_wd", d.ngram_wd, 0, 1e3);
  c.ngram_eps = r.number_or("ngram_eps", d.ngram_eps, 0, 1);
  c.ngram_beta2 = r.number_or("ngram_beta2", d.ngram_beta2, 0, 1, true);
  c.ngram_wd_mul_early = r.number_or("ngram_wd_mul_early", d.ngram_wd_mul_early, 0, 1e6);
  c.ngram_wd_mul_late = r.number_or("ngram_wd_mul_late", d.ngram_wd_mul_late, 0, 1e6);
  c.ngram_cache_rows = r.integer_or("ngram_cache_rows", d.ngram_cache_rows, 1, kMaxCacheRows);
  c.value_embeds_on_cadence = r.boolean_or("value_embeds_on_cadence", d.value_embeds_on_cadence);

  c.tail_average = r.boolean_or("tail_average", d.tail_average);
  c.tail_ema_window = r.integer_or("tail_ema_window", d.tail_ema_window, 1, kMaxSteps);
  c.tail_avg_window = r.integer_or("tail_avg_window", d.tail_avg_window, 1, kMaxSteps);
  c.value_embed_avg_window = r.integer_or("value_embed_avg_window", d.value_embed_avg_window, 1, kMaxSteps);
  c.bank_blend_window = r.integer_or("bank_blend_window", d.bank_blend_window, 1, kMaxSteps);
  // Rates are lerp factors of an accumulator toward the weight: (0, 1].
  c.tail_ema_rate = r.number_or("tail_ema_rate", d.tail_ema_rate, 0, 1);
  c.tail_avg_rate = r.number_or("tail_avg_rate", d.tail_avg_rate, 0, 1);
  c.bank_blend_rate = r.number_or("bank_blend_rate", d.bank_blend_rate, 0, 1);
  for (const auto& [key, value] : {std::pair{"tail_ema_rate", c.tail_ema_rate}, std::pair{"tail_avg_rate", c.tail_avg_rate},
                                   std::pair{"bank_blend_rate", c.bank_blend_rate}}) {
    GPT_CHECK(value > 0, "recipe ", r.source(), ": key '", r.full(key), "' must be a number in (0, 1], got ", value);
  }
  c.tail_avg_every = r.integer_or("tail_avg_every", d.tail_avg_every, 1, kMaxSteps);
  c.bank_blend_every = r.integer_or("bank_blend_every", d.bank_blend_every, 1, kMaxSteps);
  c.tail_ema_ship = r.number_or("tail_ema_ship", d.tail_ema_ship, 0, 1);
  c.bank_blend_ship_qk = r.number_or("bank_blend_ship_qk", d.bank_blend_ship_qk, 0, 1);
  c.bank_blend_ship = r.number_or("bank_blend_ship", d.bank_blend_ship, 0, 1);

  c.canonical_mask = r.choice_or("canonical_mask", d.canonical_mask, {"off", "tier0", "tier1"});
  c.prefix_bucketed = r.boolean_or("prefix_bucketed", d.prefix_bucketed);
  c.bank_opt = r.choice_or("bank_opt", d.bank_opt, {"normuon", "anvil"});
  c.anvil_rail_warmup = r.integer_or("anvil_rail_warmup", d.anvil_rail_warmup, 0, kMaxSteps);
  c.anvil_fast_switch = r.integer_or("anvil_fast_switch", d.anvil_fast_switch, 0, kMaxSteps);
  c.anvil_rail_taper = r.integer_or("anvil_rail_taper", d.anvil_rail_taper, 0, kMaxSteps);
  c.anvil_fast_weight = r.number_or("anvil_fast_weight", d.anvil_fast_weight, 0, 1);
  c.anvil_wd = r.number_or("anvil_wd", d.anvil_wd, 0, 1e3);
  c.log_every = r.integer_or("log_every", d.log_every, 1, kMaxSteps);
  c.seed_warmup = r.boolean_or("seed_warmup", d.seed_warmup);
  r.finish();
  return c;
}

toml::table seed_canonical_table(const SeedConfig& c) {
  const SeedConfig d;
  toml::table t;
  auto put = [&t](const char* key, const auto& value, const auto& fallback) {
    if (value != fallback) t.insert(key, value);
  };
  put("ngram_rows", c.ngram_rows, d.ngram_rows);
  put("ngram_late_step", c.ngram_late_step, d.ngram_late_step);
  put("ngram_max_cycle_steps", c.ngram_max_cycle_steps, d.ngram_max_cycle_steps);
  put("ngram_lr", c.ngram_lr, d.ngram_lr);
  put("ngram_lr_mul", c.ngram_lr_mul, d.ngram_lr_mul);
  put("ngram_wd", c.ngram_wd, d.ngram_wd);
  put("ngram_eps", c.ngram_eps, d.ngram_eps);
  put("ngram_beta2", c.ngram_beta2, d.ngram_beta2);
  put("ngram_wd_mul_early", c.ngram_wd_mul_early, d.ngram_wd_mul_early);
  put("ngram_wd_mul_late", c.ngram_wd_mul_late, d.ngram_wd_mul_late);
  put("ngram_cache_rows", c.ngram_cache_rows, d.ngram_cache_rows);
  put("value_embeds_on_cadence", c.value_embeds_on_cadence, d.value_embeds_on_cadence);
  put("tail_average", c.tail_average, d.tail_average);
  put("tail_ema_window", c.tail_ema_window, d.tail_ema_window);
  put("tail_avg_window", c.tail_avg_window, d.tail_avg_window);
  put("value_embed_avg_window", c.value_embed_avg_window, d.value_embed_avg_window);
  put("bank_blend_window", c.bank_blend_window, d.bank_blend_window);
  put("tail_ema_rate", c.tail_ema_rate, d.tail_ema_rate);
  put("tail_avg_rate", c.tail_avg_rate, d.tail_avg_rate);
  put("bank_blend_rate", c.bank_blend_rate, d.bank_blend_rate);
  put("tail_avg_every", c.tail_avg_every, d.tail_avg_every);
  put("bank_blend_every", c.bank_blend_every, d.bank_blend_every);
  put("tail_ema_ship", c.tail_ema_ship, d.tail_ema_ship);
  put("bank_blend_ship_qk", c.bank_blend_ship_qk, d.bank_blend_ship_qk);
  put("bank_blend_ship", c.bank_blend_ship, d.bank_blend_ship);
  put("canonical_mask", c.canonical_mask, d.canonical_mask);
  put("prefix_bucketed", c.prefix_bucketed, d.prefix_bucketed);
  put("bank_opt", c.bank_opt, d.bank_opt);
  put("anvil_rail_warmup", c.anvil_rail_warmup, d.anvil_rail_warmup);
  put("anvil_fast_switch", c.anvil_fast_switch, d.anvil_fast_switch);
  put("anvil_rail_taper", c.anvil_rail_taper, d.anvil_rail_taper);
  put("anvil_fast_weight", c.anvil_fast_weight, d.anvil_fast_weight);
  put("anvil_wd", c.anvil_wd, d.anvil_wd);
  put("log_every", c.log_every, d.log_every);
  put("seed_warmup", c.seed_warmup, d.seed_warmup);
  return t;
}

}  // namespace gpt::recipe_detail
