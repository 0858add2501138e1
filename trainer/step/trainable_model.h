#pragma once
// What the step runner and the run loop need from a model (RECIPE §9): the trained parameters, the rest of its
// mutable state, one schedule update per step, a training forward/backward per microbatch and a validation loss per
// window. The step runner (trainer/step/step_runner.h) owns a step's ordering and the optimizer, the run loop owns
// timing and data; the model owns the math. Recipe features only some models have (FP8, the prefix and n-gram
// tables, the masked validation) are not part of this interface: such a model returns them from extensions().
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "trainer/data/train_loader.h"
#include "trainer/model/named_tensor.h"
#include "trainer/model/parameter_set.h"
#include "trainer/schedule/schedule.h"

namespace gpt {

class ModelExtensions;

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

  // Called after the run restored parameters and buffers (warmup reset, resume): rebuild anything derived from
  // them (FP8 weight copies and scales, §9.1 step 3).
  virtual void after_state_restore() {}

  // Mean validation loss (§3.4) over one validation window; no gradient, no state change.
  virtual double validation_loss(const Microbatch& window) = 0;

  // The recipe features beyond the generic step (§7.2 FP8, §3.2 prefix table, §S.2 n-gram table, §S.6 masked
  // validation; model_extensions.h), nullptr for a model without them. The same object for the model's lifetime.
  virtual ModelExtensions* extensions() { return nullptr; }
};

}  // namespace gpt
