#pragma once
// The recipe features some models carry beyond the generic step (TrainableModel, trainable_model.h): the §7.2 FP8
// weight copies, the §3.2 prefix table, the §S.2 hashed n-gram table and the §S.6 masked final validation. A model
// with them implements this interface too and returns it from TrainableModel::extensions(); a model without them
// implements only TrainableModel, and the step runner and the run loop then skip each feature.
#include <cstdint>
#include <span>
#include <string_view>

#include "kernels/tensor.h"

namespace gpt {

class NgramTable;
class TrainableModel;

class ModelExtensions {
 public:
  virtual ~ModelExtensions() = default;

  // §7.2, after each optimizer step: rebuild the FP8 weight copies; `bootstrap` (the step runner's rule: the first
  // steps) also re-derives their scales. A no-op when the recipe has FP8 off.
  virtual void refresh_fp8(bool bootstrap) = 0;

  // §S.2 hashed n-gram table when the recipe has one (recipe.extensions.ngram_rows > 0), else nullptr. The step
  // runner applies its event inside the optimizer step of every event step; the run resets, saves and restores it.
  virtual NgramTable* ngram_table() = 0;

  // Whether the loss reads the prefix table (§3.2); if so, the run builds it inside the timed region and hands it
  // over with set_prefix_table.
  virtual bool uses_prefix_table() const = 0;
  virtual void set_prefix_table(std::span<const int64_t> table) = 0;

  // §S.6: from now on validation_loss masks the logits with the canonical mask (u8 [V, V/8] on the host,
  // trainer/tokenizer/canonical_mask.h); an undefined tensor removes it. The run sets it right before the final
  // validation only.
  virtual void set_canonical_mask(const Tensor& mask) = 0;
};

// The model's extensions; throws gpt::Error naming the model and `feature` (e.g. "canonical-mask validation
// (RECIPE §S.6)") when it has none.
ModelExtensions& require_extensions(TrainableModel& model, std::string_view feature);

// The model's §S.2 n-gram table, nullptr when it has no extensions or no table.
NgramTable* ngram_table_of(TrainableModel& model);

// Whether the model's loss reads the §3.2 prefix table (false without extensions).
bool uses_prefix_table(TrainableModel& model);

}  // namespace gpt
