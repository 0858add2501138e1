#pragma once
// The GPT of RECIPE §2 (trainer/model/model.h) behind the run loop's TrainableModel interface: owns the weights,
// the parameter set, the rotary tables with their YaRN history (§2.11, §5.4, §5.5), the prefix table and the
// per-step StepConfig.
//
// Rotary state is a pure function of the step: the tables hold the YaRN events of every stage start ≤ s (the
// final validation adds none), rebuilt from the initial frequencies when the event count changes. So the warmup
// reset and a resume restore it exactly without storing it; buffers() exposes the event count for inspection.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/rotary.h"
#include "trainer/model/model.h"
#include "trainer/model/weights.h"
#include "trainer/recipe/recipe.h"
#include "trainer/run/trainable_model.h"
#include "trainer/schedule/schedule.h"

namespace gpt {

// ModelDims of a recipe's [model] table (world size sets the bank padding).
ModelDims model_dims(const ModelConfig& config, int64_t world_size);

class GptTrainable final : public TrainableModel {
 public:
  // `accumulation` = A microbatches per step; `dtype` = storage of the bf16 parameters (f32 on the CPU).
  GptTrainable(const Recipe& recipe, uint64_t seed, int64_t accumulation, DType dtype, Device device);

  std::string description() const override;
  ParameterSet& parameters() override { return params_; }
  std::vector<NamedTensor> buffers() override;
  void set_schedule(const StepSchedule& s) override;
  double train_microbatch(const Microbatch& batch, double loss_scale) override;
  void after_optimizer_step(const StepSchedule& s) override;
  void after_state_restore() override;
  double validation_loss(const Microbatch& window) override;
  // ℓ_t of §3.4 for every position of the window (f64 from the evaluation forward's raw logits): the
  // reference check compares them position by position (trainer/run/reference_export.h).
  std::vector<double> validation_losses(const Microbatch& window);
  bool uses_prefix_table() const override;
  void set_prefix_table(std::span<const int64_t> table) override;
  // Copies the mask to the model's device; validation_loss is masked from then on (undefined: unmasked again).
  // validation_losses (the per-position reference check) stays unmasked.
  void set_canonical_mask(const Tensor& mask) override;

 private:
  void rebuild_rotary(int64_t events);

  Recipe recipe_;
  Schedule schedule_;
  ModelDims dims_;
  DType dtype_;
  Device device_;
  ModelWeights weights_;
  ParameterSet params_;
  std::unique_ptr<GptModel> model_;
  std::vector<YarnEvent> yarn_events_;
  int64_t rotary_positions_ = 0;
  Tensor yarn_count_;  // i64[1]: YaRN events in the current tables
  int64_t built_events_ = -1;
  StepConfig config_;
  Tape tape_;
};

}  // namespace gpt
