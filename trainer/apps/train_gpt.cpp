// train_gpt: the NanoGPT speedrun trainer (ARCHITECTURE.md, trainer ↔ harness contract).
//   train_gpt --recipe NAME|FILE --data DIR --seed N --run-id ID --out DIR [--backend cpu|cuda] [--gpus N]
//             [--set key=value]... [--resume CHECKPOINT] [--checkpoint-every K] [--threads N]
// Exit status: 0 finished, 3 diverged (summary written), 2 bad input or usage, 1 other failure.
#include <malloc.h>
#include <omp.h>

#include <limits>

#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "trainer/run/training_run.h"

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

// The CPU backend's one thread pool is OpenMP's (its GEMMs run single-threaded BLAS inside it).
void apply_threads(int threads) { omp_set_num_threads(threads); }

// Keep freed memory in the heap instead of returning it to the kernel: the CPU backend allocates the same
// activation sizes every step, and glibc's default (mmap for blocks over 32 MiB, trim on free) made every step
// fault its logits buffers in again (a tenth of the `tiny` run).
void keep_freed_memory() {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

}  // namespace

int main(int argc, char** argv) {
  gpt::RunOptions options;
  CLI::App app{"NanoGPT speedrun trainer (RECIPE.md); writes OUT/ID.txt and OUT/ID.json"};
  app.add_option("--recipe", options.recipe, "recipe name (trainer/recipes) or path to a .toml file")->required();
  app.add_option("--data", options.data_dir, "directory with train_*/val_* (or fineweb_*) shards")->required();
  app.add_option("--seed", options.seed, "initialisation seed")->required();
  app.add_option("--run-id", options.run_id, "run name: OUT/ID.txt and OUT/ID.json")->required();
  app.add_option("--out", options.out_dir, "output directory (created if missing)")->required();
  app.add_option("--backend", options.backend, "cpu or cuda")->capture_default_str();
  app.add_option("--gpus", options.gpus, "local processes/GPUs (1 on the CPU backend)")->capture_default_str();
  app.add_option("--set", options.overrides, "override a recipe key: dotted.key=value (repeatable)");
  app.add_option("--resume", options.resume, "continue from a checkpoint file");
  app.add_option("--checkpoint-every", options.checkpoint_every, "write OUT/ID.stepNNNNNN.ckpt every K steps")
      ->capture_default_str();
  options.threads = 0;
  app.add_option("--threads", options.threads, "CPU threads (0: one per core)")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "train_gpt: " << e.what() << " (see --help)" << std::endl;
    return kExitUsage;
  }

  std::unique_ptr<gpt::TrainingRun> run;
  try {
    gpt::take_debug_switches(options);
    if (options.threads <= 0) options.threads = omp_get_num_procs();
    apply_threads(options.threads);
    keep_freed_memory();
    run = std::make_unique<gpt::TrainingRun>(options);
  } catch (const std::exception& e) {
    std::cerr << "train_gpt: " << e.what() << std::endl;
    return kExitUsage;
  }
  try {
    const gpt::RunResult result = run->run();
    if (result.status != gpt::RunStatus::finished) {
      std::cerr << "train_gpt: " << gpt::status_name(result.status) << ": " << result.error << std::endl;
    }
    return gpt::exit_code(result.status);
  } catch (const std::exception& e) {
    std::cerr << "train_gpt: " << e.what() << std::endl;
    return kExitFailure;
  }
}
