#pragma once
// One training run (RECIPE §9): warmup steps from the schedule (untimed), a full reset to the initial state,
// then the timed loop s = 0 … N with the clock stopped during validation, the speedrun log lines, checkpoints,
// and the run summary. The trainer ↔ harness contract (ARCHITECTURE.md) is implemented here: OUT/ID.txt,
// OUT/ID.json, status finished / diverged / failed.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/recipe/recipe.h"
#include "trainer/step/trainable_model.h"

namespace gpt {

class Comm;
class GptTrainable;
class Optimizer;
class StepRunner;
class ValLoader;

struct RunOptions {
  std::string recipe;                  // --recipe NAME|FILE
  std::vector<std::string> overrides;  // --set key=value (debug.* taken out by take_debug_switches)
  std::filesystem::path data_dir;      // --data
  uint64_t seed = 0;                   // --seed
  std::string run_id;                  // --run-id
  std::filesystem::path out_dir;       // --out
  std::string backend = "cpu";         // --backend
  int gpus = 1;                        // --gpus (the app launches the ranks; a rank itself runs with 1)
  int world_size = 1;                  // set by TrainingRun from its communicator before the model is built
  int threads = 1;                     // --threads (recorded; the app applies it)
  std::filesystem::path resume;        // --resume CHECKPOINT (empty: fresh run)
  int64_t checkpoint_every = 0;        // --checkpoint-every K (0: none)
  bool echo = true;                    // also print log lines to stdout
  std::filesystem::path recipe_dir = default_recipe_dir();

  // Hidden switches (`--set debug.KEY=VALUE`), not part of the recipe or its hash:
  int64_t inject_nan_step = -1;   // debug.inject_nan_step: poison lm_head before training step K, or before the
                                  // final validation when K is the step count (divergence tests)
  bool final_checkpoint = false;  // debug.final_checkpoint: also write OUT/ID.final.ckpt after the last validation
  // debug.stop_after_step=K: end the run after step K with its checkpoint OUT/ID.stepK.ckpt and status `failed`
  // ("stopped after step K"), before the later steps and the final validation (tests of a resume that compare the
  // state at a step in the middle of a run without running the rest).
  int64_t stop_after_step = -1;
  // debug.fault=KIND:RANK:STEP (fault tests of multi-rank runs): before training step STEP, rank RANK poisons its
  // parameters (nan), throws (error) or sends itself SIGKILL (kill).
  std::string fault_kind;
  int fault_rank = -1;
  int64_t fault_step = -1;
  // debug.dump_batches=DIR (one rank only): the timed loop's microbatches and the validation windows, written for
  // a side-by-side run of another implementation (trainer/export/batch_dump.h).
  std::filesystem::path dump_batches;
};

// A checkpoint of a W-rank run is one file per rank (each rank holds its own optimizer shard): rank 0's is the
// path a resume names (OUT/ID.stepNNNNNN.ckpt), rank q > 0 writes OUT/ID.stepNNNNNN.rank<q>.ckpt beside it.
std::filesystem::path rank_checkpoint_path(const std::filesystem::path& rank0_path, int rank);

// Moves the `debug.*` entries of options.overrides into the switches above; throws gpt::Error naming an unknown
// debug key or a bad value.
void take_debug_switches(RunOptions& options);

enum class RunStatus { finished, diverged, failed };
const char* status_name(RunStatus status);
int exit_code(RunStatus status);  // 0 finished, 3 diverged, 1 failed

struct ValPoint {
  int64_t step = 0;
  double val_loss = 0;
  double train_time_ms = 0;
};

// Train time spent in one stage's steps (§5.1; validations excluded: the clock stops for them).
struct StageTime {
  int stage = 0;
  int64_t first_step = 0;
  int64_t steps = 0;  // steps of the stage this process ran
  double train_time_ms = 0;
};

struct RunResult {
  RunStatus status = RunStatus::failed;
  std::optional<double> final_val_loss;
  double train_time_ms = 0;
  int64_t steps = 0;               // optimizer steps completed (including those before a resume)
  int64_t total_steps = 0;         // N
  int64_t tokens = 0;              // training tokens consumed by the completed steps, all ranks
  int64_t train_data_passes = 1;   // passes begun over the train shards (> 1 only with data.cycle_train_shards)
  bool train_data_cycled = false;  // the recipe let the loader restart the train shards
  std::vector<ValPoint> val_history;
  std::vector<StageTime> stage_times;  // per stage run by this process, in order
  std::vector<double> train_losses;    // mean training loss of each step run by this process, in order
  std::string error;                   // failure or divergence reason
  int interrupted_by = 0;              // the SIGINT/SIGTERM that stopped a one-rank run (stop_request.h), 0 if none
};

// Builds the model of a run; `comm` is the run's communicator (the n-gram table of §S.2 is sharded over it).
using ModelFactory = std::function<std::unique_ptr<TrainableModel>(const Recipe&, const RunOptions&, Comm&)>;
// The GPT of the recipe, initialised from options.seed: the product's model.
std::unique_ptr<TrainableModel> make_model(const Recipe& recipe, const RunOptions& options, Comm& comm);
// The same GPT (trainer/gpt/gpt_trainable.h) with its type: for drivers that need its own methods besides
// TrainableModel's (the reference export builds its run with it).
std::unique_ptr<GptTrainable> make_gpt_model(const Recipe& recipe, const RunOptions& options, Comm& comm);

// Whether a run refuses, before it allocates, a recipe whose memory estimate (memory_estimate.h) exceeds the
// device's budget. The estimate counts the GPT's parameters and activations, so a factory that builds another
// model (the tests' stand-in) passes `skip`; an allocation failure is still reported with the estimate.
enum class MemoryFitCheck { check, skip };

// Observation points for tests: the complete state (training_state.h) at each moment.
struct RunHooks {
  std::function<void(const std::vector<NamedTensor>&)> initial;       // after build, before warmup
  std::function<void(const std::vector<NamedTensor>&)> after_warmup;  // before the reset
  std::function<void(const std::vector<NamedTensor>&)> after_reset;   // the timed run's starting state
  std::function<void(const std::vector<NamedTensor>&)> at_end;        // after the loop
};

class TrainingRun {
 public:
  // Resolves and checks every input (recipe and overrides, flags, data directory and shards, checkpoint) and
  // builds the model and optimizer. Throws gpt::Error naming the flag, file or key on bad input (exit 2).
  explicit TrainingRun(RunOptions options, ModelFactory factory = make_model,
                       MemoryFitCheck memory_fit = MemoryFitCheck::check);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // Runs warmup, reset and the timed loop; writes OUT/ID.txt and OUT/ID.json. Never throws for failures inside
  // the run: they yield status failed with the summary written where possible.
  RunResult run(const RunHooks& hooks = {});

  const Recipe& recipe() const;

  // The constructed parts, for tools that drive single steps outside run() (trainer/tools/reference_export.h). Such
  // a tool reaches the model through the handle its own ModelFactory kept of what it built.
  const Schedule& schedule() const;
  Optimizer& optimizer();
  StepRunner& step_runner();  // the run's own step (trainer/step/step_runner.h)
  const ValLoader& val_loader() const;
  TrainLoader make_train_loader(LoaderPosition start = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpt
