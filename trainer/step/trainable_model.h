#pragma once
// What the step runner and the run loop need from a model (RECIPE §9): the trained parameters, the rest of its
// mutable state, one schedule update per step, a training forward/backward per microbatch and a validation loss per
// window. The step runner (trainer/step/step_runner.h) owns a step's ordering and the optimizer, the run loop owns
// timing and data; the model owns the math.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/check.h"
#include "kernels/tensor.h"
#include "trainer/data/train_loader.h"
#include "trainer/model/named_tensor.h"
#include "trainer/model/parameter_set.h"
#include "trainer/schedule/schedule.h"

namespace gpt {

class NgramTable;

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;

  // One line for the run log ("gpt d=96 L=11 ...").
  virtual std::string description() const = 0;

  // The trained parameters (RECIPE §2.2) with their gradient buffers, as the optimizer sees them.
  virtual ParameterSet& parameters() = 0;

  // Every other tensor whose value can change during a run (rotary tables, τ, FP8 scale state, the step the
  // schedule was last applied at, ...). Together with parameters() this is the model's complete state: the
  // warmup reset restores it from a snapshot and checkpoints save it, so no mutable state may live elsewhere.
  virtual std::vector<NamedTensor> buffers() = 0;

  // Applies the schedule of step s (windows, YaRN events, MTP and prefix weights). Called before validating
  // and training at s; s = N is the final validation (§5.5).
  virtual void set_schedule(const StepSchedule& s) = 0;

  // Forward and backward of one microbatch of a step of A = 1/loss_scale microbatches: adds this microbatch's
  // share of the step gradient into the gradient buffers (the model's own reduction; the GPT's is §3.3) and
  // returns the microbatch's mean training loss per position.
  virtual double train_microbatch(const Microbatch& batch, double loss_scale) = 0;

  // Overlap of the gradient reductions (trainer/optim/optimizer.h): while set, train_microbatch's backward reports
  // each group of parameters whose gradients the rest of that backward no longer changes (names, in the same order
  // on every rank). The step runner sets it for the last microbatch of a step only. A model that never reports
  // leaves every reduction to the optimizer step.
  using GradientsFinal = std::function<void(const std::vector<std::string>&)>;
  virtual void set_gradients_final(GradientsFinal report) { (void)report; }

  // Phase timing (the step bench): while set, train_microbatch calls it once its forward (loss and the loss's
  // gradient) is done, before the backward. A model without that boundary never calls it.
  virtual void set_after_forward(std::function<void()> probe) { (void)probe; }

  // §7.2, after each optimizer step: rebuild the FP8 weight copies; `bootstrap` (the step runner's rule: the first
  // steps) also re-derives their scales. Models without FP8 state ignore it.
  virtual void refresh_fp8(bool bootstrap) { (void)bootstrap; }

  // Called after the run restored parameters and buffers (warmup reset, resume): rebuild anything derived from
  // them (FP8 weight copies and scales, §9.1 step 3).
  virtual void after_state_restore() {}

  // Mean validation loss (§3.4) over one validation window; no gradient, no state change.
  virtual double validation_loss(const Microbatch& window) = 0;

  // Whether the loss reads the prefix table (§3.2); if so, the run builds it inside the timed region.
  // §S.2 hashed n-gram table when the model has one (recipe.extensions.ngram_rows > 0), else nullptr.
  virtual NgramTable* ngram_table() { return nullptr; }
  virtual bool uses_prefix_table() const = 0;
  virtual void set_prefix_table(std::span<const int64_t> table) = 0;

  // §S.6: from now on validation_loss masks the logits with the canonical mask (u8 [V, V/8] on the host,
  // trainer/tokenizer/canonical_mask.h); an undefined tensor removes it. The run sets it right before the final
  // validation only. Models without a masked validation throw.
  virtual void set_canonical_mask(const Tensor& mask) {
    (void)mask;
    GPT_FAIL(description(), ": this model has no canonical-mask validation (RECIPE §S.6)");
  }
};

}  // namespace gpt
