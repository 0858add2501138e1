#pragma once
// Tail averaging, evaluated at the final validation (RECIPE §S.5). Four accumulators, each over its own weights:
//
//   accumulator      weights                      window  fires after the optimizer step of s (N−window ≤ s < N)
//   tail-ema         lm_head, embed               298     s = N−1 (rate r); even s: only s = N−298 (the seed);
//                                                          odd s: rate 1−(1−r)², r = tail_ema_rate
//   tail-avg         vo_bank, mlp_bank            250     (N−1−s) mod tail_avg_every = 0; rate tail_avg_rate
//   value-embed-avg  value_embeds                 250     n-gram event steps (StepSchedule::ngram_event); rate
//                                                          tail_avg_rate (the recipe has one 4/53 for both)
//   bank-blend       qk_bank, vo_bank, mlp_bank   298     s mod bank_blend_every = 1 or s ≥ N−2; bank_blend_rate
//
// An accumulator's first firing tick copies the weight (the seed); later ticks do acc ← acc + rate·(w − acc).
// Accumulators are fp32 (f64 for f64 weights) and read the weights as stored (bf16 in a run).
//
// Shards (W > 1): each rank accumulates only what its optimizer owns: a bank's chunk of count/W matrices
// (the optimizer's split of the stacked matrices), the rows [rank·rows/W, (rank+1)·rows/W) of a `sharded` Adam
// group, the whole tensor of an unsharded one (then every rank holds the same full accumulator). W = 1: whole
// tensors.
//
// Tied embedding (§4.6): while tied the optimizer keeps embed = lm_headᵀ after every step, so the embed
// accumulator reads that value and averages the embedding the model actually used; with N = 1194 the tail-ema
// window (from step 896) starts before the split (1175), so the tie is not assumed away.
//
// Weights absent from the parameter set are left out; the whole object is inert when recipe.extensions.tail_average is
// off (no ticks, no ship, no checkpoint tensors), which keeps runs without it unchanged.
#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainer/comm/comm.h"
#include "trainer/model/parameter_set.h"
#include "trainer/recipe/recipe.h"
#include "trainer/schedule/schedule.h"

namespace gpt {

enum class TailAccumulator : int { tail_ema = 0, tail_avg = 1, value_embed_avg = 2, bank_blend = 3 };
inline constexpr int kTailAccumulatorCount = 4;
const char* tail_accumulator_name(TailAccumulator a);  // "tail_ema", "tail_avg", "value_embed_avg", "bank_blend"

class TailAverage {
 public:
  // `params` must outlive this object; `comm` gives the rank and world size of the shards (the same as the
  // optimizer's). Throws when a bank's matrix count or a sharded group's rows are not divisible by W.
  TailAverage(ParameterSet& params, const Recipe& recipe, const Comm& comm);

  bool enabled() const { return enabled_; }

  // After the optimizer step of step s.step (0 ≤ s.step < total_steps = N): ticks every accumulator whose rule
  // fires (table above). Reads s.step and s.ngram_event.
  void after_optimizer_step(const StepSchedule& s, int64_t total_steps);

  // The ship of the final validation, on the clock: records the Frobenius norms of embed, lm_head, mlp_bank,
  // qk_bank, vo_bank; ships tail-ema (w ← w + 0.65·(acc − w)), tail-avg (w ← acc), value-embed-avg (w ← acc),
  // bank-blend (w ← w + B·(acc − w), B = 0.55 for qk, 0.3493 for vo and mlp, from the already shipped vo/mlp),
  // each written once in the weight's dtype on the rank's shard; all-gathers every shipped sharded weight and
  // value_embeds (W > 1, in parameter registration order); then multiplies each of the five recorded weights
  // by norm_before/norm_after. An accumulator that never ticked is not shipped. Every rank must call it.
  void ship(Comm& comm);

  // §S.10 warmup reset: unseeds every accumulator (their values are overwritten by the next seed).
  void reset();

  // Checkpoint tensors, sharing storage with the live state (so restoring into them resumes bit-exactly):
  // "tail/<accumulator>/<weight>" (the rank's shard, fp32) and "tail/seeded" (u8[4], 1 = seeded, in the order
  // tail_ema, tail_avg, value_embed_avg, bank_blend). Empty when disabled.
  std::vector<std::pair<std::string, Tensor>> state_tensors() const;

  // For tests.
  bool seeded(TailAccumulator a) const;
  const Tensor& accumulator(TailAccumulator a, const std::string& weight) const;

 private:
  struct Slot {
    Parameter* param = nullptr;
    Tensor acc;
    double ship_factor = 1;
  };
  struct Accumulator {
    int64_t window = 0;
    std::vector<Slot> slots;
  };
  struct Fire {
    bool fires = false;
    double rate = 0;
  };

  Fire rule(TailAccumulator a, int64_t step, int64_t total_steps, bool ngram_event) const;
  Tensor shard_of(const Parameter& p) const;
  bool is_sharded(const Parameter& p) const;

  ParameterSet& params_;
  ExtensionsConfig config_;
  std::map<std::string, AdamGroupConfig> adam_groups_;
  int rank_ = 0, world_ = 1;
  bool enabled_ = false;
  std::array<Accumulator, kTailAccumulatorCount> accumulators_;
  Tensor seeded_;  // u8[4]
};

}  // namespace gpt
