// train_gpt: the NanoGPT speedrun trainer (ARCHITECTURE.md, trainer ↔ harness contract).
//   train_gpt --recipe NAME|FILE --data DIR --seed N --run-id ID --out DIR [--backend cpu|cuda] [--gpus N]
//             [--set key=value]... [--resume CHECKPOINT] [--checkpoint-every K] [--threads N]
// Exit status: 0 finished, 3 diverged (summary written), 2 bad input or usage, 1 other failure.
#include <omp.h>

#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "trainer/run/training_run.h"

// OpenBLAS's thread control, when the BLAS in use is OpenBLAS (weak: absent with other BLAS libraries).
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

void apply_threads(int threads) {
  omp_set_num_threads(threads);
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(threads);
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
  app.add_option("--threads", options.threads, "CPU threads")->capture_default_str();
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
    apply_threads(options.threads);
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
