// The n-gram table wired into the model (§S.2: Ng replaces Bg at every site and gate): parameters, the loss at a
// zero table, the table gradient through the whole model against finite differences (f64), and GptTrainable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "tests/common/gradcheck.h"
#include "tests/common/model_fixtures.h"
#include "trainer/comm/comm.h"
#include "trainer/model/ngram_table.h"
#include "trainer/optim/optimizer.h"
#include "trainer/recipe/recipe.h"
#include "trainer/gpt/gpt_trainable.h"

namespace gpt::testing {
namespace {

constexpr int64_t kNgramRows = 64;

ModelDims ngram_dims() {
  ModelDims d = small_dims();
  d.ngram_rows = kNgramRows;
  return d;
}

Microbatch ngram_microbatch(const ModelDims& dims, uint64_t seed) {
  Microbatch mb = make_microbatch({17, 20, 11, 1}, dims.vocab, static_cast<int32_t>(dims.bigram_rows), 0, seed);
  add_ngram_products(mb, kNgramRows);
  return mb;
}

NgramTableOptions table_options(const ModelDims& dims, DType dtype) {
  NgramTableOptions o;
  o.rows = dims.ngram_rows;
  o.dim = dims.model_dim;
  o.dtype = dtype;
  return o;
}

TEST(NgramModel, BigramEmbedIsNotAParameter) {
  const ModelDims dims = ngram_dims();
  for (const ParameterInfo& p : parameter_table(dims)) EXPECT_NE(p.name, "bigram_embed");
  ModelWeights w = init_weights(dims, 3, DType::f32);
  EXPECT_FALSE(w.bigram_embed.defined());
  ParameterSet params;
  register_parameters(w, params);
  EXPECT_FALSE(params.contains("bigram_embed"));
  EXPECT_EQ(total_parameter_count(dims) + dims.bigram_rows * dims.model_dim, total_parameter_count(small_dims()));
  GptModel model(dims, params, w.bigram_sign_table);
  const Microbatch mb = ngram_microbatch(dims, 5);
  const StepConfig cfg = make_config(dims, static_cast<int64_t>(mb.inputs.size()), DType::f32, 5, 12, 0.4);
  Tape tape;
  EXPECT_THROW(model.train_forward_backward(mb, cfg, tape), Error);  // no table set
}

TEST(NgramModel, ZeroTableGivesTheLossOfAZeroBigramEmbedding) {
  // bigram_embed starts at zero and draws no random numbers, so both models hold the same other weights.
  const ModelDims with = ngram_dims(), without = small_dims();
  ModelWeights wa = init_weights(with, 3, DType::f64), wb = init_weights(without, 3, DType::f64);
  ParameterSet pa, pb;
  register_parameters(wa, pa);
  register_parameters(wb, pb);
  GptModel ma(with, pa, wa.bigram_sign_table), mb_model(without, pb, wb.bigram_sign_table);
  auto comm = make_single_rank_comm();
  NgramTable table(table_options(with, DType::f64), wa.bigram_sign_table, *comm);
  ma.set_ngram_table(&table);
  const Microbatch mb = ngram_microbatch(with, 5);
  const StepConfig cfg = make_config(with, static_cast<int64_t>(mb.inputs.size()), DType::f64, 5, 12, 0.4);
  EXPECT_EQ(ma.training_objective(mb, cfg), mb_model.training_objective(mb, cfg));
  EXPECT_EQ(ma.validation_loss(mb, cfg), mb_model.validation_loss(mb, cfg));
}

TEST(NgramModel, TableGradientMatchesFiniteDifferencesThroughTheModel) {
  const ModelDims dims = ngram_dims();
  ModelWeights w = init_weights(dims, 7, DType::f64);
  perturb_weights(w, 11);
  ParameterSet params;
  register_parameters(w, params);
  GptModel model(dims, params, w.bigram_sign_table);
  auto comm = make_single_rank_comm();
  NgramTable table(table_options(dims, DType::f64), w.bigram_sign_table, *comm);
  model.set_ngram_table(&table);
  Tensor shard = table.shard();  // shares the table's storage
  {
    std::mt19937_64 rng(13);
    std::normal_distribution<double> normal(0.0, 0.3);
    double* p = shard.data<double>();
    for (int64_t i = 0; i < shard.numel(); ++i) p[i] = normal(rng);
  }
  const Microbatch mb = ngram_microbatch(dims, 5);
  StepConfig cfg = make_config(dims, static_cast<int64_t>(mb.inputs.size()), DType::f64, 5, 12, 0.4);
  cfg.accumulation_steps = 2;
  Tape tape;
  model.train_forward_backward(mb, cfg, tape);
  // The analytic gradient is the pending cycle (the only microbatch of the cycle).
  std::vector<int32_t> rows;
  std::vector<double> grad;
  for (const NamedTensor& t : table.checkpoint_tensors()) {
    if (t.name == "ngram/cycle_rows")
      rows.assign(t.tensor.data<int32_t>(), t.tensor.data<int32_t>() + t.tensor.numel());
    if (t.name == "ngram/cycle_grad") grad = t.tensor.to_doubles();
  }
  const std::vector<int32_t> touched = table.cycle_rows();
  ASSERT_GE(touched.size(), 10u);
  ASSERT_TRUE(touched.front() < kNgramRows / 2 && touched.back() >= kNgramRows / 2);
  rows.resize(touched.size());
  std::vector<int64_t> picks;
  std::vector<double> exact;
  // Rows of both channels (first-touch order interleaves bigram and trigram rows), two columns each.
  for (size_t slot = 0; slot < rows.size(); slot += rows.size() / 4) {
    for (int64_t c : {int64_t{0}, dims.model_dim - 1}) {
      picks.push_back(rows[slot] * dims.model_dim + c);
      exact.push_back(grad[slot * static_cast<size_t>(dims.model_dim) + static_cast<size_t>(c)]);
    }
  }
  const auto loss = [&] { return model.training_objective(mb, cfg); };
  const std::vector<double> numeric = numeric_gradient_at(loss, shard, picks, 1e-5);
  EXPECT_LT(max_relative_error(exact, numeric, 1e-6), 1e-5);
  double largest = 0;
  for (double g : exact) largest = std::max(largest, std::abs(g));
  EXPECT_GT(largest, 1e-6);
  // A row no token reads has no gradient.
  for (int32_t r = 0; r < kNgramRows; ++r) {
    if (std::find(touched.begin(), touched.end(), r) != touched.end()) continue;
    const std::vector<double> fd = numeric_gradient_at(loss, shard, {int64_t{r} * dims.model_dim}, 1e-5);
    EXPECT_EQ(fd[0], 0.0) << "row " << r;
    break;
  }
}

TEST(NgramModel, GptTrainableOwnsTheTableAndTheOptimizerNeedsNoGroup) {
  Recipe recipe = load_recipe("tiny", {"model.bigram_rows=4096", "fp8=false"});
  recipe.extensions.ngram_rows = 2048;
  recipe.optimizer.adam.erase("bigram_embed");  // a missing group must not matter: the table is no parameter
  GptTrainable model(recipe, 1, 1, DType::f32, Device::cpu);
  ASSERT_NE(model.ngram_table(), nullptr);
  EXPECT_FALSE(model.parameters().contains("bigram_embed"));
  auto comm = make_single_rank_comm();
  Optimizer optimizer(model.parameters(), recipe, *comm);
  const Schedule schedule(recipe);
  const StepSchedule s = schedule.at(1);
  model.set_schedule(s);
  Microbatch mb = make_microbatch({40, 25}, 50304, 4096, 50256, 3, 128);
  add_ngram_products(mb, recipe.extensions.ngram_rows);
  const double loss = model.train_microbatch(mb, 1.0);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_FALSE(model.ngram_table()->cycle_rows().empty());
  optimizer.step(s);
  const double before_event = model.validation_loss(mb);
  model.ngram_table()->apply_event(s.step, s.lr_mult);
  double largest = 0;
  for (double x : model.ngram_table()->shard().to_doubles()) largest = std::max(largest, std::abs(x));
  EXPECT_GT(largest, 0.0);
  EXPECT_NE(model.validation_loss(mb), before_event);  // the next forward reads the updated rows
}

}  // namespace
}  // namespace gpt::testing
