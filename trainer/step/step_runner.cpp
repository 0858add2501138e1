#include "trainer/step/step_runner.h"

#include <cmath>

#include "base/check.h"
#include "trainer/model/ngram_table.h"
#include "trainer/step/model_extensions.h"

namespace gpt {

CallShape call_shape(const StepSchedule& s) {
  return CallShape{.slice_tokens = s.slice_tokens,
                   .max_doc_tokens = s.lmax,
                   .cu_seqlens_rows = static_cast<int32_t>(s.cu_rows),
                   .segment_cap = s.segment_cap};
}

std::vector<double> all_ranks_values(Comm& comm, Device device, double value) {
  Tensor mine = Tensor::from_doubles(std::vector<double>{value}, {1}, DType::f64, device);
  Tensor all = Tensor::zeros({comm.world_size()}, DType::f64, device);
  comm.all_gather(mine, all);
  return all.to_doubles();
}

double mean_in_rank_order(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

StepRunner::StepRunner(TrainableModel& model, Optimizer& optimizer, TailAverage& tail, Comm& comm, Device device,
                       int64_t total_steps)
    : model_(model), optimizer_(optimizer), tail_(tail), comm_(comm), device_(device), total_steps_(total_steps) {}

void StepRunner::apply_schedule(const StepSchedule& s) {
  model_.set_schedule(s);
  applied_step_ = s.step;
}

StepOutcome StepRunner::step(const StepSchedule& s, std::span<const Microbatch> batches, const StepProbes& probes) {
  StepOutcome out;
  const double local = forward_backward(s, batches, probes);
  out.rank_losses = all_ranks_values(comm_, device_, local);
  out.loss = mean_in_rank_order(out.rank_losses);
  if (!std::isfinite(out.loss)) {
    abandon_step();  // every rank sees the same losses, so every rank abandons
    return out;
  }
  if (probes.optimizer_begin) probes.optimizer_begin();
  optimizer_step(s);
  out.applied = true;
  return out;
}

void StepRunner::check_schedule(const StepSchedule& s) const {
  GPT_CHECK(applied_step_ == s.step, "StepRunner: step ", s.step, " would train on the schedule of step ",
            applied_step_, " (apply_schedule(s) comes first)");
}

double StepRunner::train_microbatch(const StepSchedule& s, const Microbatch& batch, int64_t accumulation) {
  check_schedule(s);
  GPT_CHECK(accumulation >= 1, "StepRunner: step ", s.step, ": expected >= 1 microbatches per step, got ",
            accumulation);
  return model_.train_microbatch(batch, 1.0 / static_cast<double>(accumulation));
}

double StepRunner::forward_backward(const StepSchedule& s, std::span<const Microbatch> batches,
                                    const StepProbes& probes) {
  check_schedule(s);
  GPT_CHECK(!batches.empty(), "StepRunner: step ", s.step, " has no microbatches");
  double loss = 0;
  const double scale = 1.0 / static_cast<double>(batches.size());  // A = slices per call / W
  // The last microbatch's backward issues the reductions of the gradients it finishes early (optimizer.h).
  optimizer_.begin_step(s);
  auto unwire = [&] {
    model_.set_gradients_final({});
    if (probes.forward_end) model_.set_after_forward({});
  };
  try {
    for (size_t i = 0; i < batches.size(); ++i) {
      if (i + 1 == batches.size()) {
        model_.set_gradients_final(
            [this](const std::vector<std::string>& names) { optimizer_.gradients_final(names); });
      }
      if (probes.forward_end) model_.set_after_forward([&probes, i] { probes.forward_end(i); });
      if (probes.microbatch_begin) probes.microbatch_begin(i);
      loss += model_.train_microbatch(batches[i], scale) * scale;
      if (probes.microbatch_end) probes.microbatch_end(i);
    }
  } catch (...) {
    unwire();
    try {
      optimizer_.abandon_step();
    } catch (...) {  // the first error is the one to report
    }
    throw;
  }
  unwire();
  return loss;
}

void StepRunner::optimizer_step(const StepSchedule& s) {
  optimizer_.step(s);
  // §S.2: the n-gram table's event belongs to the optimizer step of its event step (collective at W > 1).
  if (NgramTable* table = ngram_table_of(model_); table != nullptr && s.ngram_event) {
    table->apply_event(s.step, s.lr_mult);
  }
  tail_.after_optimizer_step(s, total_steps_);
  if (ModelExtensions* extensions = model_.extensions()) extensions->refresh_fp8(fp8_bootstrap(s));
}

void StepRunner::abandon_step() { optimizer_.abandon_step(); }

}  // namespace gpt
