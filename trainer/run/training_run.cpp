#include "trainer/run/training_run.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <exception>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "trainer/build_info.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/comm_factory.h"
#include "trainer/comm/launch_env.h"
#include "trainer/comm/rank_status.h"
#include "trainer/data/call_prefetcher.h"
#include "trainer/data/train_loader.h"
#include "trainer/data/val_loader.h"
#include "trainer/model/ngram_table.h"
#include "trainer/optim/optimizer.h"
#include "trainer/optim/tail_average.h"
#include "trainer/run/backend.h"
#include "trainer/export/batch_dump.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/debug_faults.h"
#include "trainer/run/divergence_report.h"
#include "trainer/gpt/gpt_trainable.h"
#include "trainer/run/memory_estimate.h"
#include "trainer/run/rank_places.h"
#include "trainer/run/run_log.h"
#include "trainer/run/run_summary.h"
#include "trainer/run/stop_request.h"
#include "trainer/run/train_clock.h"
#include "trainer/run/training_state.h"
#include "trainer/schedule/schedule.h"
#include "trainer/step/model_extensions.h"
#include "trainer/step/step_runner.h"
#include "trainer/tokenizer/canonical_mask.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"

namespace gpt {

namespace {

std::string join_steps(const std::vector<int64_t>& steps) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < steps.size(); ++i) out << (i ? ", " : "") << steps[i];
  out << ']';
  return out.str();
}

// "0, 3": the positions of `values` for which `pick` holds, comma-separated ("" when none does).
template <typename Pick>
std::string positions_where(const std::vector<double>& values, Pick pick) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (pick(values[i])) out += (out.empty() ? "" : ", ") + std::to_string(i);
  }
  return out;
}

}  // namespace

std::unique_ptr<GptTrainable> make_gpt_model(const Recipe& recipe, const RunOptions& options, Comm& comm) {
  // A = slices per call / W microbatches per step (§1.3); the CPU computes in fp32 (§R.1), CUDA in bf16 (§0.4).
  const Device device = backend_device(options.backend);
  return std::make_unique<GptTrainable>(recipe, options.seed, recipe.slices_per_call / options.world_size,
                                        model_dtype(device), device, &comm);
}

std::unique_ptr<TrainableModel> make_model(const Recipe& recipe, const RunOptions& options, Comm& comm) {
  return make_gpt_model(recipe, options, comm);
}

struct TrainingRun::Impl {
  RunOptions options;
  Recipe recipe;
  Schedule schedule;
  LaunchEnv launch;
  std::unique_ptr<Comm> comm;
  std::unique_ptr<TrainableModel> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<TailAverage> tail;                 // §S.5 (inert unless recipe.extensions.tail_average)
  std::unique_ptr<StepRunner> runner;                // every training step of the run (warmup and timed)
  std::optional<CanonicalMaskOptions> mask_options;  // §S.6 from recipe.extensions.canonical_mask; nullopt = off
  std::optional<CanonicalMaskBuild> mask_build;      // §S.6, rank 0, from clock start to the final validation
  std::vector<std::filesystem::path> train_shards;
  CorpusFingerprint corpus;  // train and val shards, recorded in checkpoints: --resume must read the same data
  std::unique_ptr<ValLoader> val_loader;
  std::unique_ptr<BatchDump> batch_dump;  // debug.dump_batches: written by the timed loop only
  bool timed_loop = false;
  std::optional<CheckpointData> checkpoint;
  std::optional<CheckpointMeta> resume_meta;
  RunEnvironment environment;
  std::filesystem::path log_path, summary_path;
  std::string nonfinite_where;      // the ranks of the last non-finite training loss (W > 1)
  std::optional<RunMemory> memory;  // estimate, budget and activity: the context of an out-of-memory error

  Impl(RunOptions opts, const ModelFactory& factory, MemoryFitCheck memory_fit)
      : options(std::move(opts)),
        recipe(load_recipe(options.recipe, options.overrides, options.recipe_dir)),
        schedule(recipe),
        mask_options(canonical_mask_options(recipe.extensions.canonical_mask)) {
    check_flags();
    launch = detect_launch_env();
    check_world_size();
    comm = make_comm_from_env(backend_device(options.backend));
    options.world_size = comm->world_size();
    const Device device = backend_device(options.backend);
    memory.emplace(recipe, device, comm->world_size(), /*check_fits=*/memory_fit == MemoryFitCheck::check);
    open_data();
    if (!options.resume.empty()) read_resume_parts();
    memory->allocating("allocating the parameters, gradients and optimizer state", [&] {
      model = factory(recipe, options, *comm);
      if (comm->world_size() > 1) broadcast_initial_state();
      optimizer = std::make_unique<Optimizer>(model->parameters(), recipe, *comm);
      tail = std::make_unique<TailAverage>(model->parameters(), recipe, *comm);
    });
    runner = std::make_unique<StepRunner>(*model, *optimizer, *tail, *comm, backend_device(options.backend),
                                          schedule.total_steps());
    environment = describe_environment(options.backend, options.threads);
    describe_gpu(device, environment);
    environment.world_size = comm->world_size();
    environment.ranks = gather_rank_places(*comm, options.backend, options.threads, launch.local_rank);
    log_path = options.out_dir / (options.run_id + ".txt");
    summary_path = options.out_dir / (options.run_id + ".json");
  }

  void check_flags() const {
    GPT_CHECK(!options.run_id.empty() && options.run_id.find('/') == std::string::npos && options.run_id != "." &&
                  options.run_id != "..",
              "--run-id '", options.run_id, "': expected a non-empty name without '/'");
    (void)backend_device(options.backend);  // cpu, or cuda in a CUDA build with a visible device
    GPT_CHECK(options.gpus == 1, "--gpus ", options.gpus,
              ": a rank runs on one GPU; train_gpt's own launcher (main) starts the ranks of --gpus N");
    GPT_CHECK(options.checkpoint_every >= 0, "--checkpoint-every ", options.checkpoint_every, ": expected >= 0");
    GPT_CHECK(options.threads >= 1, "--threads ", options.threads, ": expected >= 1");
    GPT_CHECK(options.inject_nan_step <= schedule.total_steps(),
              "--set debug.inject_nan_step=", options.inject_nan_step, ": the recipe has only ", schedule.total_steps(),
              " steps (the step count itself poisons the final validation)");
    GPT_CHECK(options.stop_after_step < schedule.total_steps(), "--set debug.stop_after_step=", options.stop_after_step,
              ": expected a step before the last (the recipe has ", schedule.total_steps(), " steps)");
    std::error_code ec;
    std::filesystem::create_directories(options.out_dir, ec);
    GPT_CHECK(!ec && std::filesystem::is_directory(options.out_dir), "--out '", options.out_dir.string(),
              "': cannot create the output directory", ec ? ": " + ec.message() : "");
  }

  // §8: W ∈ {1, 2, 4, 8}, and each rank trains A = slices per call / W microbatches. Checked from the launch
  // environment, before any rank starts its communicator, so that every rank stops with the same one-line error.
  void check_world_size() const {
    const int w = launch.world_size;
    GPT_CHECK(w >= 1 && 8 % w == 0, "world size ", w, " (from ", launch.source,
              "): the ranks of a run must divide 8 (1, 2, 4 or 8)");
    GPT_CHECK(recipe.slices_per_call % w == 0, "world size ", w, " (from ", launch.source, "): recipe '", recipe.name,
              "' builds ", recipe.slices_per_call,
              " slice(s) per loader call, which must divide among the ranks "
              "(e.g. --set slices_per_call=",
              8, ")");
  }

  // §8: every rank starts from rank 0's parameters and buffers (equal by construction from the seed; the
  // broadcast makes it so whatever the initialisation does).
  void broadcast_initial_state() {
    for (Parameter& p : model->parameters().all()) comm->broadcast(p.value, 0);
    for (NamedTensor& b : model->buffers()) comm->broadcast(b.tensor, 0);
  }

  void open_data() {
    const std::string dir = options.data_dir.string();
    GPT_CHECK(std::filesystem::is_directory(options.data_dir), "--data '", dir, "': not a directory");
    train_shards = find_split_shards(options.data_dir, ShardSplit::train);
    // Headers, ids, and at least one BOS per shard, up front.
    corpus.dir = dir;
    for (const auto& shard : train_shards) {
      const Shard opened = Shard::open(shard);
      check_corpus_shard(opened, ShardSplit::train);
      corpus.add_shard(shard, static_cast<int64_t>(opened.size()));
    }
    ValLoaderOptions vo;
    vo.shards = find_split_shards(options.data_dir, ShardSplit::val);
    for (const auto& shard : vo.shards) {
      corpus.add_shard(shard, static_cast<int64_t>(Shard::open(shard, ShardOpenOptions{false}).size()));
    }
    vo.total_tokens = recipe.validation.tokens;
    vo.window_tokens = recipe.validation.batch_tokens;
    vo.world_size = comm->world_size();
    vo.rank = comm->rank();
    vo.cu_seqlens_rows = static_cast<int32_t>(recipe.validation.cu_rows);
    vo.bigram_rows = static_cast<int32_t>(recipe.model.bigram_rows);
    vo.ngram_rows = recipe.extensions.ngram_rows;
    val_loader = std::make_unique<ValLoader>(vo);
    if (!options.dump_batches.empty()) {
      GPT_CHECK(comm->world_size() == 1, "--set debug.dump_batches: a run of one rank only (this one has ",
                comm->world_size(), ")");
      batch_dump = std::make_unique<BatchDump>(options.dump_batches);
      batch_dump->write_validation(*val_loader);
    }
  }

  // Each rank reads and checks its own part of the checkpoint; then every rank learns every rank's verdict and
  // step before any of them throws, so that a rank missing its file cannot leave the others waiting in a collective.
  void read_resume_parts() {
    const std::filesystem::path mine = rank_checkpoint_path(options.resume, comm->rank());
    std::exception_ptr problem;
    try {
      GPT_CHECK(std::filesystem::exists(mine), "--resume '", options.resume.string(), "': rank ", comm->rank(),
                "'s part '", mine.string(), "' is missing (a checkpoint of W ranks is one file per rank)");
      checkpoint = read_checkpoint(mine);
      resume_meta = CheckpointMeta::from_json(checkpoint->meta, mine.string());
      check_resume(*resume_meta, mine);
    } catch (const std::exception&) {
      problem = std::current_exception();
    }
    const std::vector<double> steps = all_ranks_values(problem ? -1.0 : static_cast<double>(resume_meta->next_step));
    if (problem) std::rethrow_exception(problem);
    for (size_t q = 0; q < steps.size(); ++q) {
      GPT_CHECK(steps[q] >= 0, "--resume '", options.resume.string(), "': rank ", q, " could not use its part (its ",
                "own message says why)");
      GPT_CHECK(steps[q] == steps[0], "--resume '", options.resume.string(), "': rank ", q, "'s part resumes at step ",
                steps[q], ", rank 0's at ", steps[0], " (files of different saves)");
    }
  }

  // `mine` is this rank's file (options.resume itself on rank 0).
  void check_resume(const CheckpointMeta& meta, const std::filesystem::path& mine) const {
    const std::string file = mine.string();
    GPT_CHECK(meta.recipe_hash == recipe.hash(), "--resume '", file, "': written by recipe '", meta.recipe_name,
              "' hash ", meta.recipe_hash, ", this run resolves recipe '", recipe.name, "' hash ", recipe.hash());
    GPT_CHECK(!meta.data || meta.data->same_data(corpus), "--resume '", file, "': trained on ", meta.data->describe(),
              ", this run's --data is ", corpus.describe());
    GPT_CHECK(meta.seed == options.seed, "--resume '", file, "': written with --seed ", meta.seed,
              ", this run has --seed ", options.seed);
    GPT_CHECK(meta.world_size == comm->world_size(), "--resume '", file, "': written with world size ", meta.world_size,
              ", this run has ", comm->world_size());
    GPT_CHECK(meta.next_step >= 0 && meta.next_step <= schedule.total_steps(), "--resume '", file, "': next step ",
              meta.next_step, " is outside the recipe's 0..", schedule.total_steps());
    GPT_CHECK(meta.rank == comm->rank(), "--resume '", file, "': holds rank ", meta.rank, "'s state, read by rank ",
              comm->rank());
  }

  TrainLoader make_train_loader(LoaderPosition start) const {
    TrainLoaderOptions lo;
    lo.shards = train_shards;
    lo.slices_per_call = static_cast<int>(recipe.slices_per_call);
    lo.world_size = comm->world_size();
    lo.rank = comm->rank();
    lo.bigram_rows = static_cast<int32_t>(recipe.model.bigram_rows);
    lo.cycle_shards = recipe.data.cycle_train_shards;
    lo.ngram_rows = recipe.extensions.ngram_rows;
    return TrainLoader(lo, start);
  }

  // The mean validation loss over the windows and ranks. A non-finite one sets nonfinite_where to the windows
  // (of this rank) whose loss was not finite.
  double validate() {
    double sum = 0;
    std::vector<double> losses;
    for (int64_t j = 0; j < val_loader->steps(); ++j) {
      losses.push_back(model->validation_loss(val_loader->window(j)));
      sum += losses.back();
    }
    const double mean = all_ranks_mean(sum / static_cast<double>(val_loader->steps()));
    const auto nonfinite = [](double loss) { return !std::isfinite(loss); };
    const std::string windows = positions_where(losses, nonfinite);
    nonfinite_where.clear();
    if (!windows.empty()) {
      nonfinite_where = std::string(" (validation window") +
                        (std::count_if(losses.begin(), losses.end(), nonfinite) > 1 ? "s " : " ") + windows + " of " +
                        std::to_string(val_loader->steps()) + ")";
    }
    return mean;
  }

  // Appended to a divergence's error: where in the run's state the non-finite values are (trainer/run/
  // divergence_report.h). Each rank names its own tensors; at W > 1 the ranks also exchange how many they hold
  // (collective: every rank diverges at the same step, since all see the same reduced loss).
  std::string nonfinite_state() {
    std::vector<NamedTensor> state = live_state();
    if (const NgramTable* table = ngram_table_of(*model)) {
      for (NamedTensor& t : table->live_tensors()) state.push_back(std::move(t));
    }
    const StateScan scan = scan_state(state);
    const std::string mine = describe_nonfinite_state(scan);
    if (comm->world_size() == 1) return "; " + mine;
    const std::vector<double> counts = all_ranks_values(static_cast<double>(scan.nonfinite.size()));
    const std::string ranks = positions_where(counts, [](double count) { return count > 0; });
    return "; rank " + std::to_string(comm->rank()) + ": " + mine +
           "; ranks holding non-finite state: " + (ranks.empty() ? "none" : ranks);
  }

  double all_ranks_mean(double value) { return mean_in_rank_order(all_ranks_values(value)); }

  std::vector<double> all_ranks_values(double value) {
    return gpt::all_ranks_values(*comm, backend_device(options.backend), value);
  }

  // " (rank 1, 3)" when W > 1 and some ranks' values are not finite, else "".
  std::string nonfinite_ranks(const std::vector<double>& values) const {
    if (values.size() < 2) return "";
    const std::string ranks = positions_where(values, [](double v) { return !std::isfinite(v); });
    return ranks.empty() ? "" : " (rank " + ranks + ")";
  }

  // One step (trainer/step/step_runner.h) on this rank's microbatches of one loader call; returns the mean loss
  // over ranks. The schedule of s has been applied. `next`: the step after it, whose loader call is then built in
  // the background while this one runs (trainer/data/call_prefetcher.h).
  double train_step(const StepSchedule& s, CallPrefetcher& calls, const std::optional<StepSchedule>& next) {
    const std::vector<Microbatch> batches = calls.take(call_shape(s));
    if (next) calls.prefetch(call_shape(*next));
    const StepOutcome outcome = runner->step(s, batches);
    if (batch_dump && timed_loop) batch_dump->write_step(s.step, batches, outcome.loss);
    if (!outcome.applied) nonfinite_where = nonfinite_ranks(outcome.rank_losses);
    return outcome.loss;
  }

  void write_header(RunLog& log) const {
    log.line("run_id: " + options.run_id + " seed: " + std::to_string(options.seed));
    log.line("recipe: " + recipe.name + " hash: " + recipe.hash());
    log.line("git: " + environment.git_commit + (environment.git_dirty ? " (dirty)" : ""));
    log.line("environment: host=" + environment.hostname + " cpu=\"" + environment.cpu +
             "\" threads=" + std::to_string(environment.threads) + " backend=" + environment.backend + " compiler=\"" +
             environment.compiler + "\" build=" + environment.build_type);
    log.line("world_size: " + std::to_string(comm->world_size()) + " (launcher: " + launch.source +
             ") accumulation: " + std::to_string(recipe.slices_per_call / comm->world_size()) + " microbatches");
    for (const RankPlace& p : environment.ranks)
      log.line("rank " + std::to_string(p.rank) + ": host=" + p.host + " device=" + p.device);
    log.line("model: " + model->description());
    if (recipe.data.cycle_train_shards) {
      log.line("train data: " + std::to_string(train_shards.size()) +
               " shard(s), cycled when they run out (data.cycle_train_shards = true: a proxy-corpus run, "
               "not a record)");
    }
    log.line("resolved config:");
    std::istringstream config(recipe.canonical());
    for (std::string line; std::getline(config, line);) log.line("  " + line);
    log.line(std::string(100, '='));
  }

  RunSummary summary_of(const RunResult& r) const {
    RunSummary s;
    s.run_id = options.run_id;
    s.seed = options.seed;
    s.recipe_name = recipe.name;
    s.recipe_hash = recipe.hash();
    s.result = r;
    s.peak_memory = device_peak_memory_mib(backend_device(options.backend));
    s.world_size = comm->world_size();
    s.backend = options.backend;
    s.environment = environment;
    return s;
  }

  // Everything the warmup reset restores and a checkpoint saves, as live handles: the model's and optimizer's
  // state and the tail accumulators (§S.5). The n-gram table (§S.2) is saved apart (ngram/* copies): its pending
  // cycle changes size, and the reset zeroes it instead of restoring a snapshot (its shard can be tens of GB).
  std::vector<NamedTensor> live_state() {
    std::vector<NamedTensor> out = collect_state(*model, *optimizer);
    for (auto& [name, t] : tail->state_tensors()) out.push_back({name, t});
    return out;
  }

  std::vector<NamedTensor> checkpoint_state() {
    std::vector<NamedTensor> out = live_state();
    if (const NgramTable* table = ngram_table_of(*model)) {
      for (NamedTensor& t : table->checkpoint_tensors()) out.push_back(std::move(t));
    }
    return out;
  }

  void restore_checkpoint_state(const std::vector<NamedTensor>& saved, const std::string& what) {
    std::vector<NamedTensor> table_part, rest;
    for (const NamedTensor& t : saved) (t.name.starts_with("ngram/") ? table_part : rest).push_back(t);
    restore_state(live_state(), rest, what);
    NgramTable* table = ngram_table_of(*model);
    GPT_CHECK(table != nullptr || table_part.empty(), what, ": holds an n-gram table, this run's recipe has none");
    if (table != nullptr) table->restore_checkpoint(table_part);
  }

  void save_checkpoint(const std::filesystem::path& path, int64_t next_step, const CallPrefetcher& loader,
                       const RunResult& r) {
    CheckpointMeta meta;
    meta.run_id = options.run_id;
    meta.seed = options.seed;
    meta.recipe_name = recipe.name;
    meta.recipe_hash = recipe.hash();
    meta.data = corpus;
    meta.world_size = comm->world_size();
    meta.rank = comm->rank();
    meta.next_step = next_step;
    meta.loader = loader.position();
    meta.train_time_ms = r.train_time_ms;
    meta.tokens = r.tokens;
    meta.val_history = r.val_history;
    meta.counters = read_counters(*model, *optimizer);
    // W > 1: each rank holds its own optimizer shard, so each writes its own file. Rank 0's file (the one a
    // resume names) is written last, after every other part is in place: its presence means the set is whole.
    const std::vector<NamedTensor> state = checkpoint_state();
    if (comm->rank() > 0) write_checkpoint(rank_checkpoint_path(path, comm->rank()), meta.to_json(), state);
    comm->barrier();
    if (comm->rank() == 0) write_checkpoint(path, meta.to_json(), state);
  }

  void warmup_and_reset(RunLog& log, const RunHooks& hooks) {
    const std::vector<NamedTensor> live = live_state();
    if (hooks.initial) hooks.initial(live);
    const std::vector<int64_t> steps = schedule.warmup_steps();
    if (steps.empty()) {
      log.line("Warmup skipped (schedule.warmup = false)");
      return;  // nothing to reset, so no snapshot of the initial state either
    }
    const std::vector<NamedTensor> initial = clone_state(live);
    log.line("Warming up kernels (untimed)");
    log.line("Sampling steps " + join_steps(steps) + " for warmup");
    CallPrefetcher loader(make_train_loader({}));
    const Microbatch val_window = val_loader->window(0);
    for (size_t i = 0; i < steps.size(); ++i) {
      StepSchedule s = schedule.at(steps[i]);
      // §S.10: during warmup the table events run on every Adam step (the warmup steps are not consecutive).
      if (ngram_table_of(*model) != nullptr) s.ngram_event = s.adam_step;
      runner->apply_schedule(s);
      (void)model->validation_loss(val_window);
      std::optional<StepSchedule> next;
      if (i + 1 < steps.size()) next = schedule.at(steps[i + 1]);
      (void)train_step(s, loader, next);
    }
    if (hooks.after_warmup) hooks.after_warmup(live);
    log.line("Resetting Model");
    restore_state(live, initial, "warmup reset");
    optimizer->reset();
    // §S.10 additions: the table's shard, second moments and pending cycle are zeroed in place; the tail
    // accumulators are unseeded (the sampler's offsets are a model buffer, restored with the snapshot).
    if (NgramTable* table = ngram_table_of(*model)) table->reset();
    tail->reset();
    model->parameters().zero_grads();
    model->after_state_restore();
    if (hooks.after_reset) hooks.after_reset(live);
  }

  // §S.5 / §S.11: the tail-average ship belongs to the timed region, before the final validation's forwards.
  // §S.6: the canonical mask (rank 0's build, broadcast) masks the final validation only.
  void prepare_final_validation() {
    if (tail->enabled()) tail->ship(*comm);
    if (mask_options) {
      const Device device = backend_device(options.backend);
      require_extensions(*model, "canonical-mask validation (RECIPE §S.6)")
          .set_canonical_mask(broadcast_canonical_mask(mask_build ? &*mask_build : nullptr, *comm, device));
      mask_build.reset();  // its 316 MB are on the model's device now
    }
  }

  RunResult timed_run(RunLog& log, const RunHooks& hooks, const RunStopRequests& stop_requests) {
    RunResult r;
    const int64_t total = schedule.total_steps();
    r.total_steps = total;
    int64_t start_step = 0;
    LoaderPosition start_position{};
    std::optional<Gpt2Tokenizer> tokenizer;
    if (uses_prefix_table(*model) || mask_options) tokenizer = Gpt2Tokenizer::load_default();  // off the clock
    if (resume_meta) {
      restore_checkpoint_state(checkpoint->tensors, "--resume '" + options.resume.string() + "'");
      optimizer->restore_counters(resume_meta->counters.adam_steps, resume_meta->counters.tied);
      model->after_state_restore();
      start_step = resume_meta->next_step;
      start_position = resume_meta->loader;
      r.train_time_ms = resume_meta->train_time_ms;
      r.tokens = resume_meta->tokens;
      r.steps = start_step;
      r.val_history = resume_meta->val_history;
      log.line("Resuming from " + options.resume.string() + " at step " + std::to_string(start_step));
      checkpoint.reset();
    }
    CallPrefetcher loader(make_train_loader(start_position));
    TrainClock clock([device = backend_device(options.backend)] { synchronize_device(device); });
    clock.set_accumulated(r.train_time_ms);
    clock.start();
    // §S.6: rank 0 builds the canonical mask in a thread from clock start; the final validation waits for it.
    if (mask_options && comm->rank() == 0) mask_build.emplace(*tokenizer, *mask_options);
    if (uses_prefix_table(*model)) {
      // §3.2 on the clock; §S.7: by buckets over the ranks and an all-reduce(MAX).
      const std::vector<int64_t> table =
          recipe.extensions.prefix_bucketed
              ? build_prefix_table_bucketed(*tokenizer, *comm, backend_device(options.backend), recipe.model.vocab_size)
              : build_prefix_table(*tokenizer, recipe.model.vocab_size);
      require_extensions(*model, "prefix table (RECIPE §3.2)").set_prefix_table(table);
    }
    r.status = RunStatus::finished;
    timed_loop = true;
    for (int64_t step = start_step; step <= total; ++step) {
      stop_requests.throw_if_requested();
      const StepSchedule s = schedule.at(step);
      runner->apply_schedule(s);
      if (s.validation) {
        if (step == total) {
          prepare_final_validation();  // on the clock (§S.11)
          inject_final_validation_faults(options, total, *model);
        }
        clock.stop();
        memory->set_activity("validating at step " + std::to_string(step));
        const double val_loss = validate();
        r.train_time_ms = clock.elapsed_ms();
        r.val_history.push_back({step, val_loss, r.train_time_ms});
        log.line(validation_line(step, total, val_loss, r.train_time_ms));
        if (!std::isfinite(val_loss)) {
          r.status = RunStatus::diverged;
          r.error = "non-finite validation loss at step " + std::to_string(step) + nonfinite_where + nonfinite_state();
          break;
        }
        if (step == total) r.final_val_loss = val_loss;
        clock.start();
      }
      if (step == total) break;
      if (r.stage_times.empty() || r.stage_times.back().stage != s.stage) r.stage_times.push_back({s.stage, step});
      const double before_step_ms = clock.elapsed_ms();
      inject_debug_faults(options, step, comm->rank(), *model);
      memory->set_activity("training at step " + std::to_string(step));
      std::optional<StepSchedule> next;
      if (step + 1 < total) next = schedule.at(step + 1);
      const double loss = train_step(s, loader, next);
      r.train_losses.push_back(loss);
      if (!std::isfinite(loss)) {
        clock.stop();
        r.train_time_ms = clock.elapsed_ms();
        r.status = RunStatus::diverged;
        r.error = "non-finite training loss at step " + std::to_string(step) + nonfinite_where + nonfinite_state();
        break;
      }
      r.steps = step + 1;
      r.tokens += s.batch_tokens;
      r.stage_times.back().steps += 1;
      r.stage_times.back().train_time_ms += clock.elapsed_ms() - before_step_ms;
      if (s.log_line) log.line(training_line(step + 1, total, clock.elapsed_ms()));  // §S.11 thins them
      const bool periodic = options.checkpoint_every > 0 && (step + 1) % options.checkpoint_every == 0;
      const bool stop_here = step + 1 == options.stop_after_step;
      if ((periodic || stop_here) && step + 1 < total) {
        clock.stop();
        r.train_time_ms = clock.elapsed_ms();
        char name[32];
        std::snprintf(name, sizeof(name), ".step%06lld.ckpt", static_cast<long long>(step + 1));
        save_checkpoint(options.out_dir / (options.run_id + name), step + 1, loader, r);
        clock.start();
      }
      if (stop_here) {
        r.status = RunStatus::failed;
        r.error = "stopped after step " + std::to_string(step + 1) + " (debug.stop_after_step)";
        break;
      }
    }
    clock.stop();
    r.train_time_ms = clock.elapsed_ms();
    r.train_data_cycled = recipe.data.cycle_train_shards;
    r.train_data_passes = loader.passes_begun();
    if (r.train_data_cycled) log.line("train data passes: " + std::to_string(r.train_data_passes));
    if (r.status == RunStatus::diverged) log.line("diverged: " + r.error);
    if (r.status == RunStatus::finished && options.final_checkpoint) {
      save_checkpoint(options.out_dir / (options.run_id + ".final.ckpt"), total, loader, r);
    }
    if (hooks.at_end) hooks.at_end(live_state());
    const PeakMemoryMib peak = device_peak_memory_mib(backend_device(options.backend));  // CPU: peak RSS for both
    log.line(peak_memory_line(peak.allocated, peak.reserved));
    return r;
  }
};

TrainingRun::TrainingRun(RunOptions options, ModelFactory factory, MemoryFitCheck memory_fit)
    : impl_(std::make_unique<Impl>(std::move(options), factory, memory_fit)) {}
TrainingRun::~TrainingRun() = default;
const Recipe& TrainingRun::recipe() const { return impl_->recipe; }
const Schedule& TrainingRun::schedule() const { return impl_->schedule; }
Optimizer& TrainingRun::optimizer() { return *impl_->optimizer; }
StepRunner& TrainingRun::step_runner() { return *impl_->runner; }
const ValLoader& TrainingRun::val_loader() const { return *impl_->val_loader; }
TrainLoader TrainingRun::make_train_loader(LoaderPosition start) const { return impl_->make_train_loader(start); }

RunResult TrainingRun::run(const RunHooks& hooks) {
  Impl& m = *impl_;
  const bool master = m.comm->rank() == 0;
  RunResult result;
  result.total_steps = m.schedule.total_steps();
  std::optional<RunLog> log;
  // A rank's failure ends every rank: it tells the others (their collectives throw PeerFailure naming it), rank 0
  // writes the summary, then the job ends with the failing rank's status.
  bool rank_failed = false;
  const RunStopRequests stop_requests(m.comm->world_size());
  if (master) {
    spdlog::info("run {}: recipe {}, {} step(s) on {} rank(s); log {}", m.options.run_id, m.recipe.name,
                 result.total_steps, m.comm->world_size(), m.log_path.string());
  }
  try {
    log.emplace(m.log_path, master, !m.options.resume.empty(), m.options.echo);
    m.write_header(*log);
    m.warmup_and_reset(*log, hooks);
    result = m.timed_run(*log, hooks, stop_requests);
  } catch (const PeerFailure& e) {
    rank_failed = true;
    result.status = e.exit_code() == exit_code(RunStatus::diverged) ? RunStatus::diverged : RunStatus::failed;
    result.error = e.what();
    if (log) log->line(std::string("failed: ") + e.what());
  } catch (const std::exception& e) {
    result.status = RunStatus::failed;
    result.error = m.memory->failure_message(e);
    result.interrupted_by = stop_requests.interrupted_by();
    if (m.comm->world_size() > 1) {
      rank_failed = true;
      m.comm->notify_failure(exit_code(result.status), result.error);
      result.error = "rank " + std::to_string(m.comm->rank()) + ": " + result.error;
      // Only rank 0 writes the log; another rank's failure reaches the log through rank 0.
      if (!master) spdlog::error("{}", result.error);
    }
    try {
      if (log) log->line("failed: " + result.error);
    } catch (const std::exception&) {
      // The log itself failed (the error above names it); the summary below still records the failure.
    }
  }
  if (master) {
    try {
      write_run_summary(m.summary_path, m.summary_of(result));
    } catch (const std::exception& e) {
      result.status = RunStatus::failed;
      result.error += std::string(result.error.empty() ? "" : "; ") + e.what();
    }
    spdlog::info("run {} {} after {} step(s); summary {}", m.options.run_id, status_name(result.status), result.steps,
                 m.summary_path.string());
  }
  // The launcher of `--ranks N` learns from this how the rank ended (the job may end before main returns).
  record_rank_end(exit_code(result.status), result.error);
  if (rank_failed) m.comm->end_job_after_failure(exit_code(result.status));
  return result;
}

}  // namespace gpt
