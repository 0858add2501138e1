// StepRunner (trainer/step/step_runner.h): the order of one step's parts, on the standin model
// (tests/common/standin_model.h: a real model with banks under NorMuon and Adam parameters, trained by the real
// optimizer) wrapped to record what the runner asks.
#include "trainer/step/step_runner.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/check.h"
#include "tests/common/standin_model.h"
#include "trainer/comm/comm.h"
#include "trainer/model/ngram_table.h"
#include "trainer/optim/optimizer.h"
#include "trainer/optim/tail_average.h"
#include "trainer/recipe/recipe.h"
#include "trainer/schedule/schedule.h"
#include "trainer/step/model_extensions.h"

namespace gpt {
namespace {

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// The standin model, recording what the runner asks of it: per microbatch whether gradients_final was wired, every
// FP8 refresh with its form, the order of the probes. `report` (when not empty) is what the wired backward reports.
// It has the extensions (model_extensions.h), so that the runner's FP8 refreshes and table events reach it.
class RecordingModel final : public TrainableModel, public ModelExtensions {
 public:
  explicit RecordingModel(uint64_t seed) : inner_(StandinDims{}, seed) {}
  std::string description() const override { return "recording " + inner_.description(); }
  ParameterSet& parameters() override { return inner_.parameters(); }
  std::vector<NamedTensor> buffers() override { return inner_.buffers(); }
  void set_schedule(const StepSchedule& s) override {
    scheduled.push_back(s.step);
    inner_.set_schedule(s);
  }
  double train_microbatch(const Microbatch& batch, double loss_scale) override {
    wired.push_back(static_cast<bool>(gradients_final_));
    scales.push_back(loss_scale);
    if (throw_at_microbatch == static_cast<int>(wired.size()) - 1) GPT_FAIL("RecordingModel: planted failure");
    const double loss = inner_.train_microbatch(batch, loss_scale);
    if (after_forward_) after_forward_();
    if (gradients_final_ && !report.empty()) gradients_final_(report);
    return poison_loss ? std::numeric_limits<double>::quiet_NaN() : loss;
  }
  void set_gradients_final(GradientsFinal r) override { gradients_final_ = std::move(r); }
  void set_after_forward(std::function<void()> probe) override { after_forward_ = std::move(probe); }
  double validation_loss(const Microbatch& w) override { return inner_.validation_loss(w); }
  ModelExtensions* extensions() override { return this; }
  void refresh_fp8(bool bootstrap) override { refreshes.push_back(bootstrap); }
  NgramTable* ngram_table() override { return table; }
  bool uses_prefix_table() const override { return false; }
  void set_prefix_table(std::span<const int64_t>) override {}
  void set_canonical_mask(const Tensor&) override {}

  bool gradients_final_wired() const { return static_cast<bool>(gradients_final_); }
  bool after_forward_wired() const { return static_cast<bool>(after_forward_); }

  std::vector<int64_t> scheduled;
  std::vector<bool> wired;
  std::vector<double> scales;
  std::vector<bool> refreshes;
  std::vector<std::string> report;
  int throw_at_microbatch = -1;
  bool poison_loss = false;
  NgramTable* table = nullptr;

 private:
  StandinModel inner_;
  GradientsFinal gradients_final_;
  std::function<void()> after_forward_;
};

std::vector<Microbatch> microbatches(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Microbatch> out(static_cast<size_t>(count));
  for (Microbatch& mb : out) {
    for (int t = 0; t < 32; ++t) {
      mb.inputs.push_back(static_cast<int32_t>(rng() % 50304));
      mb.targets.push_back(static_cast<int64_t>(rng() % 50304));
    }
  }
  return out;
}

// The tiny recipe's optimizer and schedule around a recording standin; `schedule_recipe` gives the step schedules.
struct Fixture {
  explicit Fixture(const std::string& schedule_recipe = "tiny")
      : recipe(load_recipe("tiny")),
        schedule(load_recipe(schedule_recipe)),
        comm(make_single_rank_comm()),
        model(7),
        optimizer(model.parameters(), recipe, *comm),
        tail(model.parameters(), recipe, *comm),
        runner(model, optimizer, tail, *comm, Device::cpu, schedule.total_steps()) {}

  StepOutcome step(int64_t s, int count = 4) {
    const StepSchedule at = schedule.at(s);
    runner.apply_schedule(at);
    return runner.step(at, microbatches(count, 100 + static_cast<uint64_t>(s)));
  }

  std::vector<Tensor> values() {
    std::vector<Tensor> out;
    for (const Parameter& p : model.parameters().all()) out.push_back(p.value.clone());
    return out;
  }

  Recipe recipe;
  Schedule schedule;
  std::unique_ptr<Comm> comm;
  RecordingModel model;
  Optimizer optimizer;
  TailAverage tail;
  StepRunner runner;
};

TEST(StepRunner, GradientsFinalIsWiredForTheLastMicrobatchOnlyAndReachesTheOptimizer) {
  Fixture f;
  f.model.report = {"mlp_bank"};  // the bank's reduction is issued from inside the last backward
  const StepOutcome out = f.step(0, 4);
  EXPECT_TRUE(out.applied);
  EXPECT_EQ(f.model.wired, (std::vector<bool>{false, false, false, true}));
  EXPECT_FALSE(f.model.gradients_final_wired()) << "the wiring outlived the step";
  EXPECT_EQ(f.model.scales, std::vector<double>(4, 0.25));
  // The report goes to the optimizer: a name it does not know is refused there, through the runner.
  f.model.report = {"no_such_parameter"};
  EXPECT_THROW(f.step(1, 2), Error);
  EXPECT_FALSE(f.model.gradients_final_wired());
}

TEST(StepRunner, AFailingMicrobatchAbandonsTheStepAndTheNextStepRuns) {
  Fixture f;
  const std::vector<Tensor> before = f.values();
  const Tensor bank_before = f.model.parameters().get("mlp_bank").value.clone();
  f.model.throw_at_microbatch = 2;
  f.model.report = {"mlp_bank"};
  EXPECT_THROW(f.step(0, 4), Error);
  EXPECT_FALSE(f.model.gradients_final_wired());
  EXPECT_TRUE(f.model.refreshes.empty()) << "an abandoned step refreshed the FP8 copies";
  const std::vector<Tensor> after = f.values();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(bitwise_equal(before[i], after[i])) << i;
  // The optimizer's step was closed: the next one opens and updates.
  f.model.throw_at_microbatch = -1;
  f.model.parameters().zero_grads();
  EXPECT_TRUE(f.step(0, 4).applied);
  EXPECT_FALSE(bitwise_equal(bank_before, f.model.parameters().get("mlp_bank").value));
}

TEST(StepRunner, EvenStepsMoveOnlyTheBanksOddStepsMoveAdamToo) {
  Fixture f;
  const std::vector<Tensor> start = f.values();
  ASSERT_TRUE(f.step(0).applied);
  const std::vector<Tensor> after_even = f.values();
  ASSERT_TRUE(f.step(1).applied);
  const std::vector<Tensor> after_odd = f.values();
  const std::vector<Parameter*> params = [&] {
    std::vector<Parameter*> out;
    for (Parameter& p : f.model.parameters().all()) out.push_back(&p);
    return out;
  }();
  for (size_t i = 0; i < params.size(); ++i) {
    const bool bank = params[i]->kind == ParamKind::bank;
    EXPECT_EQ(bitwise_equal(start[i], after_even[i]), !bank) << params[i]->name << " after the even step 0";
    EXPECT_FALSE(bitwise_equal(after_even[i], after_odd[i])) << params[i]->name << " after the odd step 1";
  }
}

TEST(StepRunner, Fp8RefreshFollowsEveryOptimizerStepBootstrapBeforeStep16) {
  Fixture f;
  ASSERT_GT(f.schedule.total_steps(), 20);
  for (int64_t s = 0; s < 20; ++s) ASSERT_TRUE(f.step(s, 2).applied) << s;
  std::vector<bool> expected(20, false);
  for (int64_t s = 0; s < kFp8BootstrapSteps; ++s) expected[static_cast<size_t>(s)] = true;
  EXPECT_EQ(f.model.refreshes, expected);
  EXPECT_EQ(kFp8BootstrapSteps, 16);  // RECIPE §7.2: the refreshes after the steps s < 16
}

TEST(StepRunner, ANonFiniteLossAbandonsTheStepWithoutUpdateOrRefresh) {
  Fixture f;
  const std::vector<Tensor> before = f.values();
  f.model.poison_loss = true;
  const StepOutcome out = f.step(1, 2);
  EXPECT_FALSE(out.applied);
  EXPECT_TRUE(std::isnan(out.loss));
  ASSERT_EQ(out.rank_losses.size(), 1u);
  EXPECT_TRUE(f.model.refreshes.empty());
  const std::vector<Tensor> after = f.values();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(bitwise_equal(before[i], after[i])) << i;
}

TEST(StepRunner, LossIsTheMeanOfTheMicrobatchesScaledByOneOverA) {
  Fixture f;
  const std::vector<Microbatch> batches = microbatches(3, 5);
  // The standin's losses at the start, from an identical model.
  RecordingModel probe(7);
  double expected = 0;
  for (const Microbatch& mb : batches) expected += probe.validation_loss(mb) * (1.0 / 3.0);
  const StepSchedule s = f.schedule.at(0);
  f.runner.apply_schedule(s);
  const StepOutcome out = f.runner.step(s, batches);
  EXPECT_NEAR(out.loss, expected, 1e-5);
  EXPECT_EQ(out.rank_losses, std::vector<double>{out.loss});
}

TEST(StepRunner, AStepWithoutItsScheduleIsRefused) {
  Fixture f;
  f.runner.apply_schedule(f.schedule.at(0));
  const StepSchedule s1 = f.schedule.at(1);
  try {
    f.runner.step(s1, microbatches(2, 1));
    FAIL() << "step 1 ran on step 0's schedule";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("apply_schedule(s) comes first"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(f.model.wired.empty()) << "a microbatch ran";
  EXPECT_EQ(f.model.scheduled, std::vector<int64_t>{0});
  f.runner.apply_schedule(s1);
  EXPECT_TRUE(f.runner.step(s1, microbatches(2, 1)).applied);
}

TEST(StepRunner, ProbesFireInStreamOrder) {
  Fixture f;
  std::vector<std::string> order;
  StepProbes probes{.microbatch_begin = [&](size_t i) { order.push_back("begin" + std::to_string(i)); },
                    .forward_end = [&](size_t i) { order.push_back("forward" + std::to_string(i)); },
                    .microbatch_end = [&](size_t i) { order.push_back("end" + std::to_string(i)); },
                    .optimizer_begin = [&] { order.push_back("optimizer"); }};
  const StepSchedule s = f.schedule.at(0);
  f.runner.apply_schedule(s);
  ASSERT_TRUE(f.runner.step(s, microbatches(2, 3), probes).applied);
  EXPECT_EQ(order, (std::vector<std::string>{"begin0", "forward0", "end0", "begin1", "forward1", "end1", "optimizer"}));
  EXPECT_FALSE(f.model.after_forward_wired()) << "the forward probe outlived the step";
  EXPECT_EQ(f.model.refreshes.size(), 1u);
}

// §S.2: the table's event runs inside the optimizer step of exactly the event steps of the schedule.
TEST(StepRunner, TableEventsFireOnTheScheduleEventSteps) {
  Fixture f("tiny-ext");
  NgramTableOptions o;
  o.rows = 64;
  o.dim = 8;
  o.late_step = 3;
  std::vector<float> pool(16 * 8);
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = (i % 3 == 0) ? -1.0f : 1.0f;
  NgramTable table(o, Tensor::from_floats(pool, {16, 8}, DType::f32), *f.comm);
  f.model.table = &table;
  int64_t expected = 0, event_steps = 0, quiet_steps = 0;
  for (int64_t s = 0; s < 24; ++s) {
    const StepSchedule at = f.schedule.at(s);
    ASSERT_TRUE(f.step(s, 2).applied) << s;
    expected += at.ngram_event ? 1 : 0;
    (at.ngram_event ? event_steps : quiet_steps)++;
    EXPECT_EQ(table.events(), expected) << "after step " << s;
  }
  EXPECT_GT(event_steps, 0);
  EXPECT_GT(quiet_steps, 0);
}

TEST(StepRunner, CallShapeCarriesTheScheduleOfTheStep) {
  StepSchedule s;
  s.slice_tokens = 2048;
  s.lmax = 512;
  s.cu_rows = 40;
  s.segment_cap = 256;
  const CallShape c = call_shape(s);
  EXPECT_EQ(c.slice_tokens, 2048);
  EXPECT_EQ(c.max_doc_tokens, 512);
  EXPECT_EQ(c.cu_seqlens_rows, 40);
  EXPECT_EQ(c.segment_cap, 256);
}

// Only TrainableModel's own pure methods: no extensions (FP8, prefix and n-gram tables, masked validation) and
// none of the optional wiring. That this class is not abstract is part of the test: the generic interface must
// not ask a model for any recipe feature it does not have.
class GenericOnlyModel final : public TrainableModel {
 public:
  explicit GenericOnlyModel(uint64_t seed) : inner_(StandinDims{}, seed) {}
  std::string description() const override { return "generic-only " + inner_.description(); }
  ParameterSet& parameters() override { return inner_.parameters(); }
  std::vector<NamedTensor> buffers() override { return inner_.buffers(); }
  void set_schedule(const StepSchedule& s) override { inner_.set_schedule(s); }
  double train_microbatch(const Microbatch& b, double scale) override { return inner_.train_microbatch(b, scale); }
  double validation_loss(const Microbatch& w) override { return inner_.validation_loss(w); }

 private:
  StandinModel inner_;
};

// The runner drives a model without extensions through whole steps, §S.2 event steps of the schedule included:
// every step is applied and moves the parameters, and the runner asks for no table and no FP8 refresh.
TEST(StepRunner, AModelWithoutExtensionsTrainsThroughEventSteps) {
  const Recipe recipe = load_recipe("tiny");
  const Schedule schedule(load_recipe("tiny-ext"));
  std::unique_ptr<Comm> comm = make_single_rank_comm();
  GenericOnlyModel model(7);
  ASSERT_EQ(model.extensions(), nullptr);
  Optimizer optimizer(model.parameters(), recipe, *comm);
  TailAverage tail(model.parameters(), recipe, *comm);
  StepRunner runner(model, optimizer, tail, *comm, Device::cpu, schedule.total_steps());
  int64_t event_steps = 0;
  for (int64_t s = 0; s < 8; ++s) {
    const StepSchedule at = schedule.at(s);
    std::vector<Tensor> before;
    for (const Parameter& p : model.parameters().all()) before.push_back(p.value.clone());
    runner.apply_schedule(at);
    const StepOutcome outcome = runner.step(at, microbatches(2, 300 + static_cast<uint64_t>(s)));
    EXPECT_TRUE(outcome.applied) << "step " << s;
    EXPECT_TRUE(std::isfinite(outcome.loss)) << "step " << s;
    size_t moved = 0, i = 0;
    for (const Parameter& p : model.parameters().all()) moved += bitwise_equal(before[i++], p.value) ? 0 : 1;
    EXPECT_GT(moved, 0u) << "step " << s << " left every parameter unchanged";
    event_steps += at.ngram_event ? 1 : 0;
  }
  EXPECT_GT(event_steps, 0) << "the schedule's first steps hold no §S.2 event step: the test shows nothing";
}

// The run's queries of a model without extensions: no table, no prefix table, and one error naming the model and
// the feature where the recipe asks for one it lacks (the §S.6 masked validation).
TEST(ModelExtensions, AModelWithoutThemHasNoTablesAndRequiringThemNamesTheFeature) {
  GenericOnlyModel generic(1);
  EXPECT_EQ(ngram_table_of(generic), nullptr);
  EXPECT_FALSE(uses_prefix_table(generic));
  try {
    (void)require_extensions(generic, "canonical-mask validation (RECIPE §S.6)");
    ADD_FAILURE() << "require_extensions returned for a model without extensions";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("generic-only standin"), std::string::npos) << what;
    EXPECT_NE(what.find(": this model has no canonical-mask validation (RECIPE §S.6)"), std::string::npos) << what;
  }
  RecordingModel recording(1);
  EXPECT_EQ(&require_extensions(recording, "anything"), static_cast<ModelExtensions*>(&recording));
}

}  // namespace
}  // namespace gpt
