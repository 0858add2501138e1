#pragma once
// One training step (RECIPE §4.1, §8), written once for every driver: the run loop (trainer/run/training_run.h),
// the step bench (trainer/bench/train_step_bench.cpp) and the reference export (trainer/tools/reference_export.h).
//
// A step s, in order:
//   1. the schedule of s reaches the model (apply_schedule: windows, YaRN, MTP and prefix weights, §5);
//   2. the optimizer opens s (begin_step), then each of the A microbatches runs forward and backward with
//      loss scale 1/A; during the last one's backward the model reports the gradients it has finished
//      (gradients_final), so that their reductions overlap the rest of that backward (§8);
//   3. the mean loss over the ranks (rank order); a non-finite loss abandons the step on every rank;
//   4. the optimizer step (NorMuon every step, Adam on odd steps, §4.1), then the §S.2 table event of an event step
//      (inside the optimizer step: collective at W > 1), the §S.5 tail-average tick, and the §7.2 FP8 refresh
//      (bootstrap after the steps s < kFp8BootstrapSteps). The table event and the FP8 refresh are asked of the
//      model's extensions (model_extensions.h); a model without them gets the generic step alone.
// The finer pieces (apply_schedule, forward_backward, optimizer_step) are public for drivers that need the state
// between them (the reference export writes gradients before the optimizer step).
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/tensor.h"
#include "trainer/comm/comm.h"
#include "trainer/data/train_loader.h"
#include "trainer/optim/optimizer.h"
#include "trainer/optim/tail_average.h"
#include "trainer/schedule/schedule.h"
#include "trainer/step/trainable_model.h"

namespace gpt {

// §7.2: the refreshes after the optimizer steps s < 16 set the W2 scales exactly (the bootstrap form).
inline constexpr int64_t kFp8BootstrapSteps = 16;

// The loader call that feeds step s (§1.3, §1.4; §S.1 segment cap).
CallShape call_shape(const StepSchedule& s);

// Every rank's `value`, in rank order (an all-gather of f64 on `device`: the NCCL communicator needs device
// tensors), and their mean summed in rank order (the same bits on every rank).
std::vector<double> all_ranks_values(Comm& comm, Device device, double value);
double mean_in_rank_order(const std::vector<double>& values);

// Timing points of a step for the step bench (each optional): the runner calls them in stream order.
struct StepProbes {
  std::function<void(size_t microbatch)> microbatch_begin;
  std::function<void(size_t microbatch)> forward_end;  // the model's forward/backward boundary (set_after_forward)
  std::function<void(size_t microbatch)> microbatch_end;
  std::function<void()> optimizer_begin;  // after the loss reduction, before the optimizer step
};

struct StepOutcome {
  double loss = 0;                  // mean training loss over the ranks (rank order)
  std::vector<double> rank_losses;  // each rank's mean over its microbatches
  bool applied = false;             // false: a non-finite loss, the step was abandoned (no update)
};

class StepRunner {
 public:
  // Every part must outlive the runner; `device` is where the loss all-gather runs (the model's device).
  // `total_steps` = N (the tail average's window is counted back from it).
  StepRunner(TrainableModel& model, Optimizer& optimizer, TailAverage& tail, Comm& comm, Device device,
             int64_t total_steps);

  // Step 1: the model takes the schedule of s. Called before a validation at s as well as before training.
  void apply_schedule(const StepSchedule& s);

  // A whole step on this rank's microbatches (apply_schedule(s) first). Throws after closing the optimizer's
  // step when a microbatch throws.
  StepOutcome step(const StepSchedule& s, std::span<const Microbatch> batches, const StepProbes& probes = {});

  // One microbatch's forward and backward in a step of `accumulation` microbatches (loss scale 1/A), without
  // opening the optimizer's step: for drivers that take a step apart (the reference export's draws). Returns the
  // microbatch's mean loss.
  double train_microbatch(const StepSchedule& s, const Microbatch& batch, int64_t accumulation);

  // Step 2 alone: opens s in the optimizer and runs the microbatches with the gradients_final wiring on the last;
  // returns this rank's mean loss. On an exception the optimizer's step is abandoned and the wiring removed.
  double forward_backward(const StepSchedule& s, std::span<const Microbatch> batches, const StepProbes& probes = {});

  // Step 4 alone: the optimizer step of s (opened here when forward_backward did not), table event, tail tick,
  // FP8 refresh.
  void optimizer_step(const StepSchedule& s);

  // Closes an open optimizer step without an update (a non-finite loss).
  void abandon_step();

  // §7.2: whether the FP8 refresh after the optimizer step of s uses the bootstrap form.
  static bool fp8_bootstrap(const StepSchedule& s) { return s.step < kFp8BootstrapSteps; }

 private:
  void check_schedule(const StepSchedule& s) const;

  TrainableModel& model_;
  Optimizer& optimizer_;
  TailAverage& tail_;
  Comm& comm_;
  Device device_;
  int64_t total_steps_ = 0;
  int64_t applied_step_ = -1;  // the step whose schedule the model holds (-1: none yet)
};

}  // namespace gpt
