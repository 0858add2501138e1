// reference_export: writes our starting weights, real microbatches and a validation window with their schedule
// arguments, and our results for them (losses, gradients, per-position validation loss, weights after an even and
// an odd optimizer step) for `scripts/reference-check` (trainer/tools/reference_export.h).
//   reference_export --recipe NAME|FILE --data DIR --seed N --out DIR [--backend cpu|cuda] [--steps S,S...]
//                    [--microbatches M] [--checkpoint CKPT]
//                    [--perturb-attention-layer L | --perturb-adam-lr GROUP | --perturb-bank-lr |
//                     --perturb-mudd-scale]
//                    [--mutation-factor F] [--val-tokens N]
//                    [--set key=value]... [--threads N]
// Exit status: 0 written, 2 bad input or usage, 1 other failure.
#include <omp.h>

#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/check.h"
#include "trainer/tools/reference_export.h"

int main(int argc, char** argv) {
  gpt::ReferenceExportOptions options;
  CLI::App app{"Export of weights, microbatches and our results for scripts/reference-check; writes OUT/manifest.json"};
  app.add_option("--recipe", options.run.recipe, "recipe name (trainer/recipes) or path to a .toml file")->required();
  app.add_option("--data", options.run.data_dir, "directory with train_*/val_* (or fineweb_*) shards")->required();
  app.add_option("--seed", options.run.seed, "initialisation seed")->required();
  app.add_option("--out", options.run.out_dir, "export folder (created if missing)")->required();
  app.add_option("--backend", options.run.backend, "cpu or cuda")->capture_default_str();
  app.add_option("--steps", options.steps,
                 "even steps s, comma-separated; each trains s and s + 1 from the initial weights (default: 0 and "
                 "the first even step of stage 1; none with --checkpoint)")
      ->delimiter(',');
  app.add_option("--val-tokens", options.validation_tokens,
                 "leading positions of validation window 0 to evaluate (multiple of 16)")
      ->capture_default_str();
  app.add_option("--microbatches", options.microbatches,
                 "training microbatches per pair: the first M slices of the loader's call (the check's draws)")
      ->capture_default_str();
  app.add_option("--checkpoint", options.checkpoint,
                 "a one-rank checkpoint of the same recipe (train_gpt --set debug.stop_after_step=K): adds the pair "
                 "(K, K + 1) on its trained weights");
  app.add_option("--perturb-attention-layer", options.perturbed_attention_layer,
                 "mutation proof: multiply this layer's attention scale by the mutation factor (the check must fail)")
      ->capture_default_str();
  app.add_option("--perturb-adam-lr", options.perturbed_adam_group,
                 "mutation proof: multiply this Adam group's lr_mul by the mutation factor (the check must fail)");
  app.add_flag("--perturb-bank-lr", options.perturbed_bank_lr,
               "mutation proof: multiply NorMuon's learning rate (every bank) by the mutation factor (the check must "
               "fail)");
  app.add_flag("--perturb-mudd-scale", options.perturbed_mudd_scale,
               "mutation proof: multiply the MUDD coefficients of layer 10 (μ = M_0(x)) by the mutation factor (the "
               "check must fail)");
  app.add_option("--mutation-factor", options.mutation_factor,
                 "size of the mutation: 1.01 is a 1% error; larger ones show how far the check is from seeing it")
      ->capture_default_str();
  app.add_option("--set", options.run.overrides, "override a recipe key: dotted.key=value (repeatable)");
  int threads = 0;
  app.add_option("--threads", threads, "CPU threads (0: one per core)")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "reference_export: " << e.what() << " (see --help)" << std::endl;
    return 2;
  }
  if (threads < 0) {
    std::cerr << "reference_export: --threads " << threads << ": expected >= 0" << std::endl;
    return 2;
  }
  if (threads > 0) omp_set_num_threads(threads);
  options.run.threads = threads > 0 ? threads : omp_get_max_threads();
  try {
    const auto manifest = gpt::write_reference_export(options);
    std::cout << "wrote " << manifest.string() << std::endl;
    return 0;
  } catch (const gpt::Error& e) {
    std::cerr << "reference_export: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "reference_export: " << e.what() << std::endl;
    return 1;
  }
}
