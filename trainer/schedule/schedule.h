#pragma once
// Everything that holds at optimizer step s (RECIPE §1.3–§1.6, §4.4, §4.6, §5, §6, §9.1), computed from a recipe.
// Steps run 0 … N−1; step N is the final validation (last stage with t = 1, final windows).
#include <cstdint>
#include <compare>
#include <optional>
#include <vector>

#include "trainer/recipe/recipe.h"

namespace gpt {

struct StepSchedule {
  int64_t step = 0;
  int stage = 0;  // index into the recipe's stage list (the last one is the extension)
  int64_t stage_begin = 0, stage_end = 0;
  int64_t batch_tokens = 0;  // B
  int64_t slice_tokens = 0;  // T = B / slices_per_call
  int64_t cu_rows = 0;       // R (§1.4)
  int64_t lmax = 0;
  int64_t ws_short_blocks = 0, ws_long_blocks = 0;
  int64_t ws_short_tokens = 0, ws_long_tokens = 0;
  double lr_mult = 0;  // η(s)
  std::vector<double> mtp_weights;
  double prefix_weight = 0;
  double momentum = 0;      // μ(s)
  bool adam_step = false;   // s odd
  bool tied = true;         // embed tied to lm_head during this step (s ≤ split)
  bool split_step = false;  // the untie happens at the end of this step
  bool validation = false;  // a validation runs before training step s (or at s = N)
  // §S (zero / false when the recipe's switches are off):
  int64_t sampled_softmax = 0;  // §S.4 P; 0 = full softmax (always 0 at s = N)
  bool ngram_event = false;  // §S.2 the n-gram table (and §S.3 value_embeds) update inside this step's optimizer step
  int64_t segment_cap = 0;   // §S.1 attention segment cap in tokens; 0 = none
  bool log_line = true;      // §S.11 whether the training line of this step is written
};

// §S.9 configuration key of a training step: one captured step graph per distinct key.
struct StepGraphKey {
  int64_t slice_tokens = 0;     // T
  int64_t cu_rows = 0;          // R
  int64_t mtp_weights = 0;      // number of MTP predictions
  int64_t sampled_softmax = 0;  // P (0 = full)
  int64_t ws_short_blocks = 0, ws_long_blocks = 0;
  int64_t max_segment = 0;  // attention max_seqlen: min(lmax, segment cap) (lmax without a cap)
  auto operator<=>(const StepGraphKey&) const = default;
};

struct YarnEvent {
  int64_t step = 0;
  int64_t old_long_tokens = 0, new_long_tokens = 0;
};

struct ValidationWindows {
  int64_t ws_short_tokens = 0, ws_long_tokens = 0;
  bool yarn = false;  // false for the final validation (§5.5): tables stay as set at the last stage start
};

class Schedule {
 public:
  explicit Schedule(const Recipe& recipe);

  int64_t total_steps() const { return total_steps_; }  // N
  int num_stages() const { return static_cast<int>(begins_.size()); }
  int64_t stage_begin(int stage) const;
  int64_t stage_end(int stage) const;
  int stage_of(int64_t step) const;  // step in [0, N]; N maps to the last stage

  int64_t slice_tokens(int stage) const;
  int64_t stage_tokens(int stage) const;  // B × steps of the stage
  int64_t total_tokens() const;

  double lr_mult(int64_t step) const;
  double momentum(int64_t step) const;
  std::vector<double> mtp_weights(int64_t step) const;
  double prefix_weight(int64_t step) const;
  static bool is_adam_step(int64_t step) { return step % 2 == 1; }
  int64_t split_step() const { return split_step_; }
  bool is_validation_step(int64_t step) const;
  std::vector<int64_t> validation_steps() const;
  ValidationWindows validation_windows(int64_t step) const;
  std::vector<YarnEvent> yarn_events() const;  // at stage starts where the long window changes
  std::optional<YarnEvent> yarn_event(int64_t step) const;
  // §9.1, or §S.10 when recipe.extensions.warmup_list: {0,1} ∪ {b−2…b+1} for every stage start and sampled-softmax
  // change b ∪ {split+1…split+3} ∪ each graph key's first step and the next; ascending, in [0, N); at most 40 (else
  // an error). Empty when schedule.warmup is false.
  std::vector<int64_t> warmup_steps() const;
  static constexpr size_t kMaxSeedWarmupSteps = 40;

  // §S (declared here so every component reads one schedule):
  // §S.4 P(s), stepped like prefix_steps over the stage's sampled_softmax list; 0 = full softmax (stages without a
  // list, and s = N).
  int64_t sampled_softmax_size(int64_t step) const;
  // §S.2 is_update_step(s): odd s before extensions.ngram_late_step, then s mod c = c−1 (c =
  // extensions.ngram_max_cycle_steps); false when the table is off (extensions.ngram_rows = 0) and at s = N.
  bool is_ngram_event(int64_t step) const;
  // §S.11: the training line after step s (s < N) is written when (s+1) mod extensions.log_every = 0 or s+1 ≥ N−1.
  bool logs_training_line(int64_t step) const;
  StepGraphKey graph_key(int64_t step) const;         // §S.9, for s < N
  int64_t main_steps() const { return main_steps_; }  // num_scheduled + growth_steps (the cooldown's span end)

  StepSchedule at(int64_t step) const;

  // §1.4: R = 64, 96, 128 for T = 16384, 32768, 49152 (and §S.1: 128 for the taper's 40960), else
  // 128·⌈⌊T/300⌋/128⌉ (at least 128).
  static int64_t cu_rows_for(int64_t slice_tokens);

 private:
  void check_step(int64_t step, bool allow_final) const;
  double stage_fraction(int64_t step, int stage) const;  // t of §5.3
  // §S.1 stepping: min(k−1, ⌊k·(s−a)/(b−a)⌋) for a stage [a, b) with k parts; k−1 at s = N.
  size_t stepped_index(int64_t step, int stage, size_t parts) const;
  std::vector<int64_t> seed_warmup_steps() const;

  Recipe recipe_;
  std::vector<int64_t> begins_, ends_;
  int64_t total_steps_ = 0;
  int64_t main_steps_ = 0;      // num_scheduled + growth_steps
  int64_t cooldown_start_ = 0;  // c0
  int64_t split_step_ = 0;
};

}  // namespace gpt
