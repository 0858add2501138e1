#pragma once
// A training recipe (RECIPE §0.2, §5.1, §R, §S): every number the trainer needs that is not hard-wired to the
// 11-layer topology. Recipes are TOML files under trainer/recipes/ (`head`, `tiny`, `mini`, `track1` = head, and the
// §S profile `ext`, `mini-ext`, `tiny-ext`); a recipe may start from another with `inherits = "NAME"` and override
// only what differs. Every key can be overridden from the command line with `--set dotted.key=value` (array elements
// by index, e.g. `schedule.stages.1.lmax=1024`; a bare word is a string). Each key — its type, range, default, whether
// it is optional and how it enters the canonical text — is declared once in recipe_keys.cpp (docs/recipes.md shows
// the table, `train_gpt --list-keys` prints it); unknown keys are errors.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace gpt {

struct ModelConfig {
  int64_t model_dim = 0;    // d
  int64_t num_heads = 0;    // H
  int64_t head_dim = 0;     // Dh
  int64_t num_layers = 0;   // L (11; the topology of §2.1 is fixed)
  int64_t mlp_hidden = 0;   // 4d
  int64_t mudd_hidden = 0;  // hidden width of the MUDD MLPs (§2.6, §2.7)
  int64_t vocab_size = 0;   // padded V
  int64_t bigram_rows = 0;  // rows of bigram_embed (M = rows − 1)
  double init_bound = 0;    // bank init U(−bound, bound)
  double rotary_base = 0;   // ω_k = base^(−k/(F−1)), F = Dh/4 frequencies
};

// One row of the stage table (§5.1). The last stage is the extension.
struct StageConfig {
  int64_t batch_tokens = 0;  // B: tokens per optimizer step over all slices
  int64_t lmax = 0;          // maximum document length
  int64_t ws_short = 0;      // short window in blocks
  int64_t ws_long = 0;       // long window in blocks
  double lr_mul = 0;
  std::vector<double> mtp_start, mtp_end;  // MTP weights at the stage start and end (same length)
  double prefix_start = 0, prefix_end = 0;
  // §S.1 stepped prefix weight: when non-empty it replaces prefix_start/end; k values split the stage's steps into
  // k equal parts (index = min(k−1, ⌊k·(s−a)/(b−a)⌋)).
  std::vector<double> prefix_steps;
  // §S.4 sampled-softmax size P per equal part of the stage (same stepping as prefix_steps); 0 = full softmax.
  // Empty = full softmax for the whole stage.
  std::vector<int64_t> sampled_softmax;
};

struct ScheduleConfig {
  int64_t num_scheduled = 0;            // steps of the scheduled stages (all but the extension)
  int64_t num_extension = 0;            // steps of the extension stage
  std::vector<double> stage_durations;  // relative durations of the scheduled stages
  // §S.1: steps added to every stage end from stage `growth_stage` on (0 = none); the cooldown spans
  // num_scheduled + growth_steps main steps.
  int64_t growth_steps = 0;
  int64_t growth_stage = 2;
  // §S.1 attention segment cap in tokens (0 = none): cu_seqlens gets a boundary every segment_cap tokens inside a
  // document, and attention max_seqlen = min(lmax, segment_cap). A multiple of window_block.
  int64_t segment_cap = 0;
  std::vector<StageConfig> stages;      // scheduled stages, then the extension
  int64_t window_block = 0;             // tokens per window block
  double cooldown_frac = 0;             // η decays over the last cooldown_frac of the scheduled steps
  double lr_floor = 0;                  // η at the end of the cooldown
  int64_t split_stage = 0;              // embed/lm_head split at stage_start(split_stage) | 1
  int64_t momentum_warmup_steps = 0;    // μ ramps 0.85 → 0.95 over these steps
  int64_t momentum_cooldown_steps = 0;  // μ falls back over the last steps
  double momentum_min = 0, momentum_max = 0;
  int64_t final_ws_short = 0, final_ws_long = 0;  // windows of the final validation (§5.5)
  // [project definition] R of every training slice = §1.4's R × this (≥ 1). Extra rows are empty trailing segments
  // (same math); corpora with shorter documents than FineWeb (the proxy corpus) need more than §1.4's R.
  int64_t cu_rows_multiplier = 1;
  // §9.1 warmup before the timed run. [project definition] false skips it (and its reset): on the CPU backend
  // there are no kernels to compile or tune, so warmup would only double the run (recipe `tiny`).
  bool warmup = true;
};

struct AdamGroupConfig {
  double beta1 = 0, beta2 = 0, lr_mul = 0, wd_mul = 0;
  bool sharded = false;  // reduce-scatter rows (true) or all-reduce (false) when W > 1
};

struct BankConfig {
  double odd_matrix_lr_mul = 1;  // mat_mult of odd global matrix indices (2 for mlp_bank's W2)
};

struct OptimizerConfig {
  double bank_lr = 0, bank_wd = 0, bank_beta2 = 0;  // NorMuon (§4.2, §4.3)
  double adam_lr = 0, adam_wd = 0, adam_eps = 0;    // Adam (§4.5)
  std::map<std::string, AdamGroupConfig> adam;      // by parameter name
  std::map<std::string, BankConfig> banks;          // by parameter name
};

struct ValidationConfig {
  int64_t every = 0;         // validate at multiples of this (0: only at the end)
  int64_t tokens = 0;        // tokens per validation
  int64_t batch_tokens = 0;  // tokens per forward per rank (Tv)
  int64_t cu_rows = 0;       // cu_seqlens rows of a validation forward
};

// RECIPE §S extensions (the [extensions] table; optional: every switch defaults to off, and each key is left out of
// the canonical text while it equals its default, so recipes written before it keep their hash).
struct ExtensionsConfig {
  // §S.2 hashed n-gram table replacing bigram_embed: total rows Vng (even; 0 = off, bigram_embed of §2.5).
  int64_t ngram_rows = 0;
  int64_t ngram_late_step = 336;  // cadence: odd steps before it; s mod max_cycle = max_cycle−1 from it
  int64_t ngram_max_cycle_steps = 4;
  double ngram_lr = 0.008, ngram_lr_mul = 70, ngram_wd = 0.005, ngram_eps = 1e-10;
  double ngram_beta2 = 0.95;  // before ngram_late_step; its square from then on
  double ngram_wd_mul_early = 5, ngram_wd_mul_late = 10;
  int64_t ngram_cache_rows = 524288;     // W > 1 row cache capacity per rank
  bool value_embeds_on_cadence = false;  // §S.3
  // §S.5 tail averaging, shipped at the final validation.
  bool tail_average = false;
  int64_t tail_ema_window = 298, tail_avg_window = 250, value_embed_avg_window = 250, bank_blend_window = 298;
  double tail_ema_rate = 2.0 / 299, tail_avg_rate = 4.0 / 53, bank_blend_rate = 2.0 / 75;
  int64_t tail_avg_every = 4;    // tail-avg fires when (N−1−s) mod this = 0
  int64_t bank_blend_every = 4;  // bank-blend fires when s mod this = 1 or s ≥ N−2
  double tail_ema_ship = 0.65, bank_blend_ship_qk = 0.55, bank_blend_ship = 0.3493;
  std::string canonical_mask = "off";  // §S.6: off | tier0 | tier1
  bool prefix_bucketed = false;        // §S.7
  std::string bank_opt = "normuon";    // §S.8: normuon | anvil
  int64_t anvil_rail_warmup = 240, anvil_fast_switch = 514, anvil_rail_taper = 50;
  double anvil_fast_weight = 0.4385, anvil_wd = 2.25;
  int64_t log_every = 1;     // §S.11: training lines when (s+1) mod this = 0 or s+1 ≥ N−1
  bool warmup_list = false;  // §S.10 warmup step list (P changes, split+1..3) instead of §9.1's
  friend bool operator==(const ExtensionsConfig&, const ExtensionsConfig&) = default;
};

// Training data handling (the [data] table; optional, every key defaults to off).
struct DataConfig {
  // Restart the train shards from the first one when the last runs out, instead of stopping the run. For proxy
  // corpora smaller than a run's token budget; a record on FineWeb never cycles (the harness refuses such runs).
  bool cycle_train_shards = false;
  friend bool operator==(const DataConfig&, const DataConfig&) = default;
};

// The record check of a recipe's runs (the [record] table): a sweep passes when its mean final val loss is
// below `target` with significance. `source` says where the figure comes from (a rule, a measured baseline).
struct RecordTarget {
  double target = 0;
  std::string source;
};

struct Recipe {
  std::string name;
  ModelConfig model;
  ScheduleConfig schedule;
  OptimizerConfig optimizer;
  ValidationConfig validation;
  DataConfig data;
  ExtensionsConfig extensions;  // RECIPE §S switches (RECIPE names the profile that turns them on `seed`)
  int64_t slices_per_call = 0;  // slices per loader call; T = B / slices_per_call
  bool fp8 = false;
  RecordTarget record;

  // Canonical TOML text of the resolved recipe (sorted keys). Each key's rule is declared with it (recipe_keys.cpp):
  // required keys always; optional keys ([data], [extensions], the §S schedule and stage keys) only where they differ
  // from their defaults, so recipes written before them keep their hash; some keep the spelling they had when the
  // hashes were first recorded (`target_loss` for record.target, the `seed` table for [extensions]).
  std::string canonical() const;
  // FNV-1a 64 of canonical(), as 16 hex digits: identifies the resolved configuration in run summaries.
  std::string hash() const;
};

// Directory of the shipped recipes (trainer/recipes in the source tree).
std::filesystem::path default_recipe_dir();

// Loads NAME (a recipe in `recipe_dir`) or a path to a .toml file, applies `overrides` ("dotted.key=value",
// the value in TOML syntax; bare words are taken as strings), validates every field. Throws gpt::Error naming
// the file, key and expectation on any problem.
Recipe load_recipe(const std::string& name_or_path, const std::vector<std::string>& overrides = {},
                   const std::filesystem::path& recipe_dir = default_recipe_dir());

// Same, from TOML text (for tests); `inherits` is resolved in `recipe_dir`.
Recipe parse_recipe(const std::string& toml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides = {},
                    const std::filesystem::path& recipe_dir = default_recipe_dir());

}  // namespace gpt
