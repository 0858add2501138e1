// §S.4 wired into the model: GptTrainable builds C per microbatch when the step's P > 0, trains on the sampled
// loss (lm_head's gradient only in the columns C), keeps validation on the full softmax, and exposes the sweep
// offsets as a buffer (checkpointed, restored by the warmup reset).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "tests/common/model_fixtures.h"
#include "trainer/recipe/recipe.h"
#include "trainer/gpt/gpt_trainable.h"

namespace gpt::testing {
namespace {

constexpr int32_t kBos = 50256;
constexpr int64_t kP = 2048;

Recipe sampled_recipe() {
  Recipe recipe = load_recipe("tiny", {"model.bigram_rows=4096"});
  recipe.schedule.stages[0].sampled_softmax = {kP};
  return recipe;
}

const Tensor* find_buffer(const std::vector<NamedTensor>& buffers, const std::string& name) {
  for (const NamedTensor& b : buffers) {
    if (b.name == name) return &b.tensor;
  }
  return nullptr;
}

// One test, two models: building a tiny model (V = 50304 tables) is the expensive part.
TEST(SampledSoftmaxModel, TinyStepTrainsOnCandidateColumnsAndValidatesOnTheFullSoftmax) {
  const Recipe recipe = sampled_recipe();
  GptTrainable sampled(recipe, 7, 1, DType::f32, Device::cpu);
  GptTrainable full(load_recipe("tiny", {"model.bigram_rows=4096"}), 7, 1, DType::f32, Device::cpu);
  const Microbatch mb = make_microbatch({40, 30, 59}, 50304, 4096, kBos, 3);
  StepSchedule step = Schedule(recipe).at(0);
  ASSERT_EQ(step.sampled_softmax, kP);  // the schedule reads the stage's list
  step.sampled_softmax = 0;             // the full model trains on the whole vocabulary
  full.set_schedule(step);
  step.sampled_softmax = kP;
  sampled.set_schedule(step);

  const double full_loss = full.train_microbatch(mb, 1.0);
  const double sampled_loss = sampled.train_microbatch(mb, 1.0);
  ASSERT_TRUE(std::isfinite(sampled_loss));
  EXPECT_LT(sampled_loss, full_loss);  // lse over C < lse over V: the omitted mass is not corrected for

  // The sweep offset of slice 0 moved by ⌊1.7·need⌋ + 256.
  const std::set<int64_t> distinct(mb.targets.begin(), mb.targets.end());
  const int64_t need = kP - static_cast<int64_t>(distinct.size());
  EXPECT_EQ(sampled.candidate_sampler().offset(0), 17 * need / 10 + 256);

  // lm_head's gradient: nonzero columns are exactly C's (a fresh sampler rebuilds the same C).
  const std::vector<int64_t> c = CandidateSampler(50304, 1).build(mb.targets, kP, 0);
  const Tensor& grad = sampled.parameters().get("lm_head").grad;
  const std::vector<double> g = grad.to_doubles();
  const int64_t d = grad.size(0), vocab = grad.size(1);
  std::vector<char> column_used(static_cast<size_t>(vocab), 0);
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t v = 0; v < vocab; ++v)
      column_used[static_cast<size_t>(v)] |= g[static_cast<size_t>(i * vocab + v)] != 0;
  }
  std::vector<int64_t> used;
  for (int64_t v = 0; v < vocab; ++v) {
    if (column_used[static_cast<size_t>(v)] != 0) used.push_back(v);
  }
  EXPECT_EQ(used, c);

  // Validation ignores P; with P back to 0 the training loss is the full one again.
  EXPECT_EQ(sampled.validation_loss(mb), full.validation_loss(mb));
  step.sampled_softmax = 0;
  sampled.set_schedule(step);
  EXPECT_EQ(sampled.train_microbatch(mb, 1.0), full_loss);
  EXPECT_EQ(sampled.candidate_sampler().offset(0), 17 * need / 10 + 256);  // no build at P = 0

  // The offsets are a buffer only when the recipe samples at some stage (head-like recipes keep their state).
  EXPECT_FALSE(full.uses_sampled_softmax());
  EXPECT_EQ(find_buffer(full.buffers(), "sampled_softmax_offsets"), nullptr);
  EXPECT_TRUE(sampled.uses_sampled_softmax());
  const std::vector<NamedTensor> buffers = sampled.buffers();
  const Tensor* offsets = find_buffer(buffers, "sampled_softmax_offsets");
  ASSERT_NE(offsets, nullptr);
  EXPECT_EQ(offsets->shape(), (Shape{1}));  // tiny: one slice per loader call
  // The buffer shares the sampler's storage: restoring it (warmup reset, resume) restores the sampler.
  Tensor restored = *offsets;
  restored.data<int64_t>()[0] = 12345;
  EXPECT_EQ(sampled.candidate_sampler().offset(0), 12345);
  sampled.candidate_sampler().reset();
  EXPECT_EQ(offsets->data<int64_t>()[0], 0);

  step.sampled_softmax = 50304 + 1;
  EXPECT_THROW(sampled.set_schedule(step), Error);
}

}  // namespace
}  // namespace gpt::testing
