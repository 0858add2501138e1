// The trainer program behind train_gpt (trainer_program.h): command line, rank launcher, run and exit status.
#include "trainer/run/trainer_program.h"

#include <malloc.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>

#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/log.h"
#include "base/log_flags.h"

#include "trainer/comm/local_launcher.h"
#include "trainer/comm/rank_status.h"
#include "trainer/recipe/recipe_keys.h"
#include "trainer/run/backend.h"
#include "trainer/run/training_run.h"

namespace gpt {

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

// The CPU backend's one thread pool is OpenMP's (its GEMMs run single-threaded BLAS inside it).
void apply_threads(int threads) { omp_set_num_threads(threads); }

// Default threads of one rank: the cores shared by the ranks on this machine.
int default_threads() {
  int local_ranks = 1;
  for (const char* var : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* value = std::getenv(var); value != nullptr && std::atoi(value) > 0) {
      local_ranks = std::atoi(value);
      break;
    }
  }
  const int threads = std::max(1, omp_get_num_procs() / local_ranks);
  spdlog::debug("CPU threads: {} ({} core(s) shared by {} local rank(s); --threads overrides)", threads,
                omp_get_num_procs(), local_ranks);
  return threads;
}

// `--gpus N` / `--ranks N` with N > 1: checks what can be checked once (world size, backend, devices, the recipe's
// slices per call), then this process only supervises the N ranks it starts. Returns the run's exit status.
int launch_ranks(RunOptions options, int cpu_ranks, int argc, char** argv) {
  GPT_CHECK(options.gpus == 1 || cpu_ranks == 1, "--gpus ", options.gpus, " and --ranks ", cpu_ranks,
            ": give one of them");
  const bool cpu = options.backend == "cpu";
  const std::string flag = options.gpus > 1 ? "--gpus" : "--ranks";
  const int ranks = std::max(options.gpus, cpu_ranks);
  GPT_CHECK(ranks >= 1 && 8 % ranks == 0, flag, " ", ranks, ": the ranks of a run must divide 8 (1, 2, 4 or 8)");
  if (flag == "--gpus") {
    GPT_CHECK(!cpu, "--gpus ", ranks, ": the CPU backend has no GPUs; use --ranks ", ranks, " for CPU ranks");
    const int visible = visible_cuda_devices();
    GPT_CHECK(visible >= ranks, "--gpus ", ranks, ": only ", visible, " CUDA device(s) visible");
  } else {
    GPT_CHECK(cpu, "--ranks ", ranks, ": CPU ranks need --backend cpu; use --gpus ", ranks, " for GPUs");
  }
  take_debug_switches(options);
  const Recipe recipe = load_recipe(options.recipe, options.overrides, options.recipe_dir);
  GPT_CHECK(recipe.slices_per_call % ranks == 0, flag, " ", ranks, ": recipe '", recipe.name, "' builds ",
            recipe.slices_per_call,
            " slice(s) per loader call, which must divide among the ranks (e.g. --set "
            "slices_per_call=8)");
  return flag == "--gpus" ? launch_local_ranks(ranks, argc, argv) : launch_mpi_ranks(ranks, argc, argv);
}

// Keep freed memory in the heap instead of returning it to the kernel: the CPU backend allocates the same
// activation sizes every step, and glibc's default (mmap for blocks over 32 MiB, trim on free) made every step
// fault its logits buffers in again (a tenth of the `tiny` run).
void keep_freed_memory() {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

// --print-recipe: the resolved recipe as JSON ({"name", "hash", "record": {"target", "source"}}).
int print_recipe(const RunOptions& options, const std::string& program) {
  try {
    const Recipe recipe = load_recipe(options.recipe, options.overrides, options.recipe_dir);
    const nlohmann::json doc = {{"name", recipe.name},
                                {"hash", recipe.hash()},
                                {"record", {{"target", recipe.record.target}, {"source", recipe.record.source}}}};
    std::cout << doc.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << std::endl;
    return kExitUsage;
  }
}

}  // namespace

int run_trainer_program(int argc, char** argv, const TrainerProgram& program) {
  log::start(program.name);
  RunOptions options;
  CLI::App app{"NanoGPT speedrun trainer (docs/RECIPE.md); writes OUT/ID.txt and OUT/ID.json"};
  // A run needs all of these; printing the recipe needs only --recipe (and any --set), listing the keys nothing.
  const auto given = [&](const char* flag) {
    return std::any_of(argv + 1, argv + argc, [flag](const char* a) { return std::string(a) == flag; });
  };
  const bool listing = given("--list-keys");
  const bool printing = given("--print-recipe") || listing;
  bool print_only = false, list_keys = false;
  app.add_flag("--print-recipe", print_only,
               "print the resolved recipe's name, hash and record target as JSON, then exit");
  app.add_flag("--list-keys", list_keys, "print the recipe key table (Markdown, as in docs/recipes.md), then exit");
  app.add_option("--recipe", options.recipe, "recipe name (trainer/recipes) or path to a .toml file")
      ->required(!listing);
  app.add_option("--data", options.data_dir, "directory with train_*/val_* (or fineweb_*) shards")->required(!printing);
  app.add_option("--seed", options.seed, "initialisation seed")->required(!printing);
  app.add_option("--run-id", options.run_id, "run name: OUT/ID.txt and OUT/ID.json")->required(!printing);
  app.add_option("--out", options.out_dir, "output directory (created if missing)")->required(!printing);
  app.add_option("--backend", options.backend, "cpu or cuda")->capture_default_str();
  app.add_option("--gpus", options.gpus, "GPUs: starts one local process per GPU (CUDA backend)")
      ->capture_default_str();
  int ranks = 1;
  app.add_option("--ranks", ranks, "CPU ranks: starts this many local processes under mpirun (CPU backend)")
      ->capture_default_str();
  app.add_option("--set", options.overrides, "override a recipe key: dotted.key=value (repeatable)");
  app.add_option("--resume", options.resume, "continue from a checkpoint file");
  app.add_option("--checkpoint-every", options.checkpoint_every, "write OUT/ID.stepNNNNNN.ckpt every K steps")
      ->capture_default_str();
  options.threads = 0;
  app.add_option("--threads", options.threads, "CPU threads (0: one per core)")->capture_default_str();
  log::LogFlags log_flags;
  log::add_log_flags(app, log_flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << program.name << ": " << e.what() << " (see --help)" << std::endl;
    return kExitUsage;
  }
  if (list_keys) {
    std::cout << recipe_key_table_markdown();
    return 0;
  }
  if (print_only) return print_recipe(options, program.name);

  if (options.gpus < 1 || ranks < 1) {
    std::cerr << program.name << ": --gpus " << options.gpus << " --ranks " << ranks << ": expected counts >= 1"
              << std::endl;
    return kExitUsage;
  }
  if (options.gpus > 1 || ranks > 1) {
    try {
      return launch_ranks(options, ranks, argc, argv);
    } catch (const std::exception& e) {
      std::cerr << program.name << ": " << e.what() << std::endl;
      return kExitUsage;
    }
  }
  std::unique_ptr<TrainingRun> run;
  try {
    take_debug_switches(options);
    if (options.threads <= 0) {
      options.threads = default_threads();
    } else {
      spdlog::debug("CPU threads: {} (--threads)", options.threads);
    }
    apply_threads(options.threads);
    keep_freed_memory();
    run = std::make_unique<TrainingRun>(options, program.model, program.memory_fit);
  } catch (const std::exception& e) {
    std::cerr << program.name << ": " << e.what() << std::endl;
    record_rank_end(kExitUsage, e.what());
    return kExitUsage;
  }
  // From here a SIGINT/SIGTERM ends the run through its failure path, with a log line and a summary (a one-rank run:
  // stop_request.h; a rank: its communicator), so a launcher may forward one.
  record_rank_start();
  try {
    const RunResult result = run->run();
    if (result.status != RunStatus::finished) {
      std::cerr << program.name << ": " << status_name(result.status) << ": " << result.error << std::endl;
    }
    if (result.interrupted_by != 0) return 128 + result.interrupted_by;  // as if the signal had ended it
    return exit_code(result.status);
  } catch (const std::exception& e) {
    std::cerr << program.name << ": " << e.what() << std::endl;
    record_rank_end(kExitFailure, e.what());
    return kExitFailure;
  }
}

}  // namespace gpt
