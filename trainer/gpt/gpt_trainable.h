#pragma once
// The GPT of RECIPE §2 (trainer/model/model.h) behind the run loop's TrainableModel interface, with the recipe
// features of ModelExtensions (FP8, prefix table, §S.2 n-gram table, §S.6 masked validation): owns the weights,
// the parameter set, the rotary tables with their YaRN history (§2.11, §5.4, §5.5), the prefix table and the
// per-step StepConfig.
//
// Rotary state is a pure function of the step: the tables hold the YaRN events of every stage start ≤ s (the
// final validation adds none), rebuilt from the initial frequencies when the event count changes. So the warmup
// reset and a resume restore it exactly without storing it; buffers() exposes the event count for inspection.
//
// §S.4 sampled softmax: when the step's StepSchedule::sampled_softmax P is > 0, train_microbatch builds the
// candidate set C of each microbatch with the CandidateSampler (its offsets are per slice index of the loader
// call) and trains on the sampled loss; validation always uses the full softmax. The sampler's offsets are a
// buffer ("sampled_softmax_offsets", listed when the recipe samples at any stage), so the warmup reset restores
// them to their initial values (§S.10) and checkpoints carry them for a bit-exact resume.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/rotary.h"
#include "trainer/comm/comm.h"
#include "trainer/model/candidate_sampler.h"
#include "trainer/model/model.h"
#include "trainer/model/ngram_table.h"
#include "trainer/model/weights.h"
#include "trainer/recipe/recipe.h"
#include "trainer/step/model_extensions.h"
#include "trainer/step/trainable_model.h"
#include "trainer/schedule/schedule.h"

namespace gpt {

// ModelDims of a recipe's [model] table (world size sets the bank padding).
ModelDims model_dims(const ModelConfig& config, int64_t world_size);

class GptTrainable final : public TrainableModel, public ModelExtensions {
 public:
  // `accumulation` = A microbatches per step; `dtype` = storage of the bf16 parameters (f32 on the CPU).
  // `ngram_comm`: the run's ranks, over which the §S.2 n-gram table is sharded (it must outlive the model); null =
  // one rank holding the whole table. Every rank must then run the same forwards and events (collectives).
  GptTrainable(const Recipe& recipe, uint64_t seed, int64_t accumulation, DType dtype, Device device,
               Comm* ngram_comm = nullptr);

  std::string description() const override;
  ParameterSet& parameters() override { return params_; }
  std::vector<NamedTensor> buffers() override;
  void set_schedule(const StepSchedule& s) override;
  double train_microbatch(const Microbatch& batch, double loss_scale) override;
  // Reported by the model's backward (StepConfig::gradients_final, model.h).
  void set_gradients_final(GradientsFinal report) override { config_.gradients_final = std::move(report); }
  // StepConfig::after_forward (model.h): the step bench's forward/backward boundary.
  void set_after_forward(std::function<void()> probe) override { config_.after_forward = std::move(probe); }
  void after_state_restore() override;
  double validation_loss(const Microbatch& window) override;
  ModelExtensions* extensions() override { return this; }

  // ModelExtensions. §7.2 (a no-op with recipe.fp8 off).
  void refresh_fp8(bool bootstrap) override;
  // §S.2 hashed n-gram table (recipe.extensions.ngram_rows > 0), else nullptr. The step runner calls
  // ngram_table()->apply_event(s.step, s.lr_mult) inside the optimizer step of every event step.
  NgramTable* ngram_table() override { return ngram_.get(); }
  bool uses_prefix_table() const override;
  void set_prefix_table(std::span<const int64_t> table) override;
  // Copies the mask to the model's device; validation_loss is masked from then on (undefined: unmasked again).
  // validation_losses (the per-position reference check) stays unmasked.
  void set_canonical_mask(const Tensor& mask) override;

  // The GPT's own, for the reference check (trainer/tools/reference_export.h) and the tests.
  // ℓ_t of §3.4 for every position of the window (f64 from the evaluation forward's raw logits): the
  // reference check compares them position by position.
  std::vector<double> validation_losses(const Microbatch& window);
  // §S.4 candidate builder (offsets per slice index); reset() also happens through the buffers' restore.
  CandidateSampler& candidate_sampler() { return candidate_sampler_; }
  // Whether any stage of the recipe trains on a sampled softmax (the offsets are then a buffer).
  bool uses_sampled_softmax() const;
  // The objective (1/A)·Σ_t ℓ_t of `batch` with the lm_head loss in FP8 (§7.1) and the MLP as configured, forward
  // only (no gradient changes): the reference check compares it with the reference's own FP8 loss kernel.
  double fp8_lm_head_objective(const Microbatch& batch);
  // The reference check's mutation proof (StepConfig::perturbed_attention_layer): −1 turns it off.
  void perturb_attention_scale(int layer, double factor) {
    config_.perturbed_attention_layer = layer;
    config_.perturbed_attention_factor = factor;
  }
  // The reference check's MUDD mutation proof (StepConfig::perturbed_mudd_scale_factor): 1 turns it off.
  void perturb_mudd_scale(double factor) { config_.perturbed_mudd_scale_factor = factor; }

 private:
  void rebuild_rotary(int64_t events);

  Recipe recipe_;
  Schedule schedule_;
  ModelDims dims_;
  DType dtype_;
  Device device_;
  ModelWeights weights_;
  ParameterSet params_;
  std::unique_ptr<Comm> ngram_comm_;  // the table's single rank when no run communicator was given
  std::unique_ptr<NgramTable> ngram_;
  std::unique_ptr<GptModel> model_;
  std::vector<YarnEvent> yarn_events_;
  int64_t rotary_positions_ = 0;
  Tensor yarn_count_;  // i64[1]: YaRN events in the current tables
  int64_t built_events_ = -1;
  StepConfig config_;
  Tape tape_;
  CandidateSampler candidate_sampler_;
  int64_t sampled_softmax_size_ = 0;  // P of the current step; 0 = full softmax
  std::vector<int64_t> prefix_host_;  // host copy of the prefix table: C's remap reads it per microbatch
};

}  // namespace gpt
