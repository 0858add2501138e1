#pragma once
// A small real model for exercising the run loop without the full GPT, a test fixture: run in-process through
// make_standin_model (tests/run/run_test_util.h), and as bin/standin_train_gpt (tests/programs/standin_train_gpt.cpp),
// train_gpt's program with this model. A hashed-vocabulary bigram predictor with one relu² MLP, trained by the
// project's optimizer through parameters named like the GPT's (embed, lm_head tied until the split; mlp_bank under
// NorMuon; scalars under Adam).
//
//   c_t = x_t mod K, z = embed[c_t], y = z + relu(z·W1ᵀ)²·W2 ⊙ scalars[0], logits = y·lm_head,
//   loss_t = cross-entropy of logits against (target_t mod K).
//
// K = 256 classes and width 16 keep a step at a few milliseconds, so run-loop tests stay fast. Arithmetic is
// f32 with a fixed loop order, so results are bitwise reproducible. Its buffer records the last scheduled step
// and the running count of schedule updates, standing in for the GPT's rotary/τ state in reset and resume tests.
#include <cstdint>
#include <memory>

#include "trainer/recipe/recipe.h"
#include "trainer/run/training_run.h"
#include "trainer/step/trainable_model.h"

namespace gpt {

struct StandinDims {
  int64_t classes = 256;  // K
  int64_t width = 16;     // d
  int64_t hidden = 64;
  int64_t bank_layers = 4;  // layer 0 and padding: 8 bank matrices
};

class StandinModel final : public TrainableModel {
 public:
  StandinModel(const StandinDims& dims, uint64_t seed);

  std::string description() const override;
  ParameterSet& parameters() override { return params_; }
  std::vector<NamedTensor> buffers() override;
  void set_schedule(const StepSchedule& s) override;
  double train_microbatch(const Microbatch& batch, double loss_scale) override;
  double validation_loss(const Microbatch& window) override;

 private:
  // Mean loss over the batch; with `loss_scale` > 0 also adds the scaled gradients.
  double run(const Microbatch& batch, double loss_scale);

  StandinDims dims_;
  ParameterSet params_;
  Tensor schedule_state_;  // f64[2]: last step given to set_schedule, number of set_schedule calls
};

// A run's ModelFactory (training_run.h) for the stand-in, seeded with the run's seed. Its runs skip the memory
// estimate (MemoryFitCheck::skip), which counts the GPT's sizes.
std::unique_ptr<TrainableModel> make_standin_model(const Recipe& recipe, const RunOptions& options, Comm& comm);

}  // namespace gpt
