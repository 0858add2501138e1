// The backward's "gradients final" reports (StepConfig::gradients_final), which let the optimizer issue a
// parameter's reduction while the rest of the backward runs: (1) no backward op after a report changes a reported
// gradient, (2) the reports come in backward order and only when asked for, (3) on 2 and 4 thread ranks a step
// whose reductions are issued from the reports gives bitwise the parameters of one that issues them all after the
// backward, with the same collectives in the same order on every rank, some of them issued during the backward.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "tests/common/model_fixtures.h"
#include "tests/common/thread_ranks.h"
#include "trainer/optim/optimizer.h"
#include "trainer/recipe/recipe.h"
#include "trainer/schedule/schedule.h"

namespace gpt {
namespace {

using testing::make_config;
using testing::make_microbatch;
using testing::ModelHarness;
using testing::small_dims;

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

ModelWeights perturbed_weights(uint64_t seed) {
  ModelWeights w = init_weights(small_dims(), 3, DType::f32);
  testing::perturb_weights(w, seed);
  return w;
}

TEST(GradientsFinal, NoLaterBackwardOpChangesAReportedGradient) {
  const ModelDims dims = small_dims();
  ModelHarness h(perturbed_weights(4));
  StepConfig cfg = make_config(dims, 48, DType::f32, 5, 12, 0.3);
  Tape tape;
  // An earlier microbatch's gradients are already in the buffers (accumulation), as on a step's last microbatch.
  (void)h.model->train_forward_backward(make_microbatch({17, 20, 11, 1}, dims.vocab, 512, 0, 5), cfg, tape);
  std::map<std::string, Tensor> before;
  for (const Parameter& p : h.params.all()) before[p.name] = p.grad.clone();

  std::vector<std::vector<std::string>> reports;
  std::map<std::string, Tensor> at_report;
  cfg.gradients_final = [&](const std::vector<std::string>& names) {
    reports.push_back(names);
    for (const std::string& name : names) {
      ASSERT_TRUE(h.params.contains(name)) << name;
      ASSERT_FALSE(at_report.contains(name)) << name << " reported twice";
      at_report[name] = h.grad(name).clone();
    }
  };
  (void)h.model->train_forward_backward(make_microbatch({30, 18}, dims.vocab, 512, 0, 6), cfg, tape);

  const std::vector<std::vector<std::string>> want = {
      {"lm_head"},
      {"mudd_w1", "mudd_w2", "mudd_b2"},
      {"qk_bank", "vo_bank", "mlp_bank", "ve_gate_bank", "resid_lambdas", "post_lambdas"}};
  EXPECT_EQ(reports, want);
  for (const auto& [name, snapshot] : at_report) {
    EXPECT_TRUE(bitwise_equal(snapshot, h.grad(name))) << name << ": changed after it was reported final";
    // The report came after this backward's own contribution (not before the parameter's ops ran).
    EXPECT_FALSE(bitwise_equal(snapshot, before.at(name))) << name << ": reported before its gradient was written";
  }
}

TEST(GradientsFinal, NoReportsUnlessAskedOrOutsideTheTrainingBackward) {
  const ModelDims dims = small_dims();
  ModelHarness h(perturbed_weights(4));
  StepConfig cfg = make_config(dims, 48, DType::f32, 5, 12, 0.3);
  int reports = 0;
  const Microbatch mb = make_microbatch({17, 20, 11, 1}, dims.vocab, 512, 0, 5);
  Tape tape;
  (void)h.model->train_forward_backward(mb, cfg, tape);  // no hook set: nothing to call
  cfg.gradients_final = [&](const std::vector<std::string>&) { ++reports; };
  (void)h.model->validation_loss(mb, cfg);
  (void)h.model->training_objective(mb, cfg);
  EXPECT_EQ(reports, 0);
  (void)h.model->train_forward(mb, cfg, tape);
  EXPECT_EQ(reports, 0) << "reports belong to the backward";
  tape.backward();
  EXPECT_EQ(reports, 3);
}

// Logs the collectives a rank issues (op and element count), forwarding to the thread ranks.
class LoggingComm final : public Comm {
 public:
  explicit LoggingComm(Comm& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  void all_reduce(Tensor& t, ReduceOp op) override { all_reduce_async(t, op).wait(); }
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override { reduce_scatter_async(in, out, op).wait(); }
  void all_gather(const Tensor& in, Tensor& out) override { all_gather_async(in, out).wait(); }
  void broadcast(Tensor& t, int root) override { inner_.broadcast(t, root); }
  void barrier() override { inner_.barrier(); }
  PendingCollective all_reduce_async(Tensor& t, ReduceOp op) override {
    log.push_back("all_reduce " + std::to_string(t.numel()));
    return inner_.all_reduce_async(t, op);
  }
  PendingCollective reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op) override {
    log.push_back("reduce_scatter " + std::to_string(in.numel()));
    return inner_.reduce_scatter_async(in, out, op);
  }
  PendingCollective all_gather_async(const Tensor& in, Tensor& out) override {
    log.push_back("all_gather " + std::to_string(out.numel()));
    return inner_.all_gather_async(in, out);
  }
  std::vector<std::string> log;

 private:
  Comm& inner_;
};

struct RankRun {
  std::vector<Tensor> values;
  std::vector<std::string> log;
  size_t issued_during_backward = 0;
};

// `steps` optimizer steps of the small model on W thread ranks (rank-dependent microbatches, two per step), with
// or without the reports wired to the optimizer on each step's last microbatch.
std::vector<RankRun> train(int world, bool overlap, int64_t steps) {
  static const Recipe recipe = load_recipe("tiny");
  const Schedule schedule(recipe);
  const ModelDims dims = small_dims();
  std::vector<RankRun> runs(static_cast<size_t>(world));
  test::run_thread_ranks(world, [&](int rank, Comm& thread_comm) {
    RankRun& run = runs[static_cast<size_t>(rank)];
    LoggingComm comm(thread_comm);
    ModelHarness h(perturbed_weights(4));
    Optimizer opt(h.params, recipe, comm);
    StepConfig cfg = make_config(dims, 48, DType::f32, 5, 12, 0.3);
    cfg.accumulation_steps = 2;
    Tape tape;
    for (int64_t s = 0; s < steps; ++s) {
      const StepSchedule at = schedule.at(s);
      opt.begin_step(at);
      const size_t before_backward = comm.log.size();
      for (int k = 0; k < 2; ++k) {
        const auto seed = static_cast<uint64_t>(100 * s + 10 * rank + k);
        StepConfig c = cfg;
        if (overlap && k == 1) {
          c.gradients_final = [&opt](const std::vector<std::string>& names) { opt.gradients_final(names); };
        }
        (void)h.model->train_forward_backward(make_microbatch({25, 24}, dims.vocab, 512, 0, seed), c, tape);
      }
      run.issued_during_backward += comm.log.size() - before_backward;
      comm.log.push_back("step " + std::to_string(s));
      opt.step(at);
    }
    for (const Parameter& p : h.params.all()) run.values.push_back(p.value.clone());
    run.log = comm.log;
  });
  return runs;
}

TEST(GradientsFinal, OverlappedReductionsGiveBitwiseTheSameStepsOnThreadRanks) {
  const int64_t steps = 4;  // banks every step, Adam (tied embed) on steps 1 and 3
  for (int world : {2, 4}) {
    SCOPED_TRACE("W=" + std::to_string(world));
    const std::vector<RankRun> after = train(world, false, steps);
    const std::vector<RankRun> overlapped = train(world, true, steps);
    for (int r = 0; r < world; ++r) {
      const RankRun& a = after[static_cast<size_t>(r)];
      const RankRun& o = overlapped[static_cast<size_t>(r)];
      ASSERT_EQ(a.values.size(), o.values.size());
      for (size_t i = 0; i < a.values.size(); ++i) {
        EXPECT_TRUE(bitwise_equal(a.values[i], o.values[i])) << "rank " << r << " parameter " << i;
      }
      EXPECT_EQ(a.issued_during_backward, 0u);
      // Per step: the three banks and, on Adam steps, the Adam parameters with their gradients final before the
      // input stage's backward; lm_head waits for embed while tied.
      EXPECT_GE(o.issued_during_backward, 3u * steps) << "rank " << r;
      EXPECT_EQ(o.log, overlapped[0].log) << "rank " << r << " issued other collectives than rank 0";
    }
  }
}

}  // namespace
}  // namespace gpt
