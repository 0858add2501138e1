// train_step_bench: one full training step of a recipe's model on one GPU (RECIPE §1.3: the recipe's microbatches
// of T tokens, forward + backward + optimizer step), timed with CUDA events. The step is the run's own: the model
// (make_gpt_model), optimizer and tail average a one-rank run of the recipe builds, driven by the step runner
// (trainer/step/step_runner.h: schedule, gradients_final overlap, loss reduction, optimizer step, §7.2 FP8 refresh).
//
//   train_step_bench [--recipe NAME|FILE] [--set KEY=VALUE]... [--steps N] [--warmup N] [--json FILE]
//                    [--only stage0,stage2,...] [--fp8 on|off|both] [--data DIR] [--cu-rows-multiplier N]
//                    [--kernel-trace PREFIX]
//
// Shapes: one per scheduled stage of the recipe (trainer/bench/step_bench_shapes.h); for `head` stage 2 (T = 49,152,
// windows 640/1408 tokens, MTP [1]), stage 1 (T = 32,768, windows 384/896, MTP [1, 0.5]) and stage 0 (T = 16,384,
// windows 128/384, MTP [1, 0.5, 0.25]); by default the last scheduled stage and stage 0. `--recipe ext` times the
// §S step (n-gram table, sampled softmax, tail average as its schedule sets them); ext is an 8-GPU recipe whose
// n-gram table (84,602,880 rows, 121 GiB in bf16) one GPU cannot hold, so its one-GPU rows take one rank's shard:
// `--set extensions.ngram_rows=10575360` (the table indexed directly, without the W > 1 row cache and exchange).
// Before each row the run's memory estimate (trainer/run/memory_estimate.h) is checked against what the device
// offers, so a row too large is refused naming the recipe keys that size it. Data: synthetic token ids with a
// BOS roughly every 700 tokens, or with --data the first call of the train loader over DIR's train shards (real
// documents: real segment lengths for attention, real bigram and n-gram rows).
// FP8: "on" is the recipe (§7.1 lm_head and §7.2 MLP products), "off" bf16 GEMMs.
// Reports ms/step, tokens/s, model TFLOP/s from the §10.2 counter (kernels/flops.h), MFU against the 989 TFLOP/s
// dense bf16 datasheet figure and against this run's measured cuBLASLt 8192³ bf16 rate, per-phase times (forward,
// backward, optimizer; summed over the step's microbatches), peak memory (caching allocator statistics) and each
// step's mean training loss (as the run logs it). --kernel-trace runs one more step per row under CUPTI
// (trainer/bench/kernel_trace.h) and adds what the GPU did in it: kernels per step, busy time against the step's
// event-timed length (the rest is GPU idle: launch gaps and host synchronisations), the longest idle gaps with the
// activities on either side, the kernels that took the most time; the raw intervals go to PREFIX-<row>.csv. Rows are
// named BM_TrainStep/<stage>/... for `head` (the history's names) and BM_TrainStep/<recipe>/<stage>/... for any other
// recipe.
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#ifdef SPEEDRUN_HAVE_CUDA
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/utc_time.h"
#include "kernels/cuda/runtime.h"
#include "kernels/gemm.h"
#include "trainer/build_info.h"
#include "trainer/comm/comm.h"
#include "trainer/data/host_products.h"
#include "trainer/data/shard.h"
#include "trainer/data/train_loader.h"
#include "trainer/optim/optimizer.h"
#include "trainer/optim/tail_average.h"
#include "trainer/recipe/recipe.h"
#include "trainer/gpt/gpt_trainable.h"
#include "trainer/bench/step_bench_shapes.h"
#ifdef SPEEDRUN_HAVE_CUPTI
#include "trainer/bench/kernel_trace.h"
#endif
#include "trainer/run/memory_estimate.h"
#include "trainer/run/training_run.h"
#include "trainer/schedule/schedule.h"
#include "trainer/step/step_runner.h"

namespace gpt {
namespace {

constexpr double kDatasheetBf16TflopS = 989.0;  // H100/H200 SXM dense bf16

struct Options {
  std::string recipe = "head";
  int steps = 6;
  int warmup = 2;
  std::string json_path;
  std::vector<std::string> only;       // empty: the last scheduled stage and stage 0
  std::string fp8 = "both";            // on | off | both
  std::string data_dir;                // empty: synthetic microbatches
  int cu_rows_multiplier = 1;          // schedule.cu_rows_multiplier (4 for the proxy corpus's shorter documents)
  std::string kernel_trace;            // empty: no traced step
  std::vector<std::string> overrides;  // --set: recipe keys, before the bench's own (cu_rows_multiplier, fp8)
};

// Synthetic microbatch: documents of 300..1100 tokens (mean 700) starting with BOS, ids uniform in [0, V).
Microbatch synthetic_microbatch(int64_t tokens, int64_t vocab, int32_t bigram_rows, int64_t lmax, int32_t cu_rows,
                                uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> doc_len(300, std::min<int64_t>(1100, lmax));
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::vector<int64_t> pieces;
  int64_t left = tokens + 1;
  while (left > 0) {
    const int64_t len = std::min(left, doc_len(rng));
    pieces.push_back(len);
    left -= len;
  }
  std::vector<int32_t> stream;
  for (int64_t len : pieces) {
    stream.push_back(50256);
    for (int64_t i = 1; i < len; ++i) stream.push_back(token(rng));
  }
  Microbatch mb;
  mb.inputs.assign(stream.begin(), stream.end() - 1);
  for (size_t i = 1; i < stream.size(); ++i) mb.targets.push_back(stream[i]);
  mb.cu_seqlens = training_cu_seqlens(pieces, cu_rows);
  mb.bigram_ids = bigram_row_ids(mb.inputs, bigram_rows - 1);
  mb.sign_rows = bigram_sign_rows(mb.inputs);
  mb.max_seqlen = longest_segment(mb.cu_seqlens);
  return mb;
}

// cuBLASLt bf16 8192³ rate on this GPU (the measured peak MFU is quoted against).
double measured_gemm_tflops() {
  constexpr int64_t n = 8192;
  Tensor a = Tensor::zeros({n, n}, DType::bf16, Device::cuda);
  Tensor b = Tensor::zeros({n, n}, DType::bf16, Device::cuda);
  Tensor c = Tensor::empty({n, n}, DType::bf16, Device::cuda);
  for (int i = 0; i < 5; ++i) gemm(a, b, c);
  cuda::Event start(true), stop(true);
  constexpr int kIters = 30;
  start.record(cuda::current_stream());
  for (int i = 0; i < kIters; ++i) gemm(a, b, c);
  stop.record(cuda::current_stream());
  stop.synchronize();
  const double ms = cuda::Event::elapsed_ms(start, stop) / kIters;
  return 2.0 * n * n * n / (ms * 1e-3) / 1e12;
}

struct PhaseEvents {
  cuda::Event step_begin{true}, step_end{true}, opt_begin{true};
  std::vector<cuda::Event> fwd_begin, fwd_end, bwd_end;
  explicit PhaseEvents(size_t microbatches) {
    for (size_t i = 0; i < microbatches; ++i) {
      fwd_begin.emplace_back(true);
      fwd_end.emplace_back(true);
      bwd_end.emplace_back(true);
    }
  }
  // The step runner's timing points, recorded on the current stream.
  StepProbes probes() {
    return StepProbes{.microbatch_begin = [this](size_t i) { fwd_begin[i].record(cuda::current_stream()); },
                      .forward_end = [this](size_t i) { fwd_end[i].record(cuda::current_stream()); },
                      .microbatch_end = [this](size_t i) { bwd_end[i].record(cuda::current_stream()); },
                      .optimizer_begin = [this] { opt_begin.record(cuda::current_stream()); }};
  }
};

struct StepTimes {
  double step_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
};

// What a one-rank run of the recipe builds (TrainingRun's make_gpt_model at W = 1, the optimizer, the tail
// average), driven by the run's own step runner: the bench times the step the run executes.
struct RecipeRun {
  Recipe recipe;
  Schedule schedule;
  std::unique_ptr<Comm> comm = make_single_rank_comm();
  std::unique_ptr<GptTrainable> model;
  Optimizer optimizer;
  TailAverage tail;
  StepRunner runner;

  explicit RecipeRun(Recipe r)
      : recipe(std::move(r)),
        schedule(recipe),
        model(make_gpt_model(recipe, run_options(), *comm)),
        optimizer(model->parameters(), recipe, *comm),
        tail(model->parameters(), recipe, *comm),
        runner(*model, optimizer, tail, *comm, Device::cuda, schedule.total_steps()) {
    if (model->uses_prefix_table()) {
      // A prefix table of valid token ids (the real one maps tokens to their longest proper prefix token, §3.2).
      std::vector<int64_t> prefix(static_cast<size_t>(recipe.model.vocab_size));
      std::mt19937_64 rng(5);
      for (int64_t& p : prefix) p = static_cast<int64_t>(rng() % 50257);
      model->set_prefix_table(prefix);
    }
  }

  static RunOptions run_options() {
    RunOptions o;
    o.backend = "cuda";
    o.seed = 1;
    o.world_size = 1;
    return o;
  }
};

// The recipe with the bench's overrides for one row.
Recipe bench_recipe(const Options& options, bool fp8) {
  std::vector<std::string> overrides = options.overrides;
  overrides.push_back("schedule.cu_rows_multiplier=" + std::to_string(options.cu_rows_multiplier));
  overrides.push_back(fp8 ? "fp8=true" : "fp8=false");
  return load_recipe(options.recipe, overrides);
}

class Bench {
 public:
  nlohmann::json run(const StepBenchShape& shape, bool fp8, const Options& options, double gemm_tflops) {
    // A fresh model per row, from the seeded initial state, with the recipe's FP8 switch set for the row.
    run_.reset();
    Recipe recipe = bench_recipe(options, fp8);
    const RunMemory memory(recipe, Device::cuda, 1, /*check_fits=*/true);
    memory.allocating("building the model", [&] { run_ = std::make_unique<RecipeRun>(std::move(recipe)); });
    const ModelDims dims = model_dims(run_->recipe.model, 1);
    std::printf("initialised the %s model (%lld parameters) on the GPU\n", run_->recipe.name.c_str(),
                static_cast<long long>(total_parameter_count(dims)));
    // Alternate an even and an odd step: NorMuon runs every step, Adam on odd steps (§4.1).
    const StepSchedule s = run_->schedule.at(shape.schedule_step);
    const StepSchedule s_odd = run_->schedule.at(shape.schedule_step + 1);
    const int64_t tokens = s.slice_tokens;
    const std::vector<Microbatch> batches = microbatches(s, options);
    const auto microbatch_count = static_cast<int>(batches.size());
    std::printf("%s fp8=%s: T=%lld x %d, windows %lld/%lld, MTP %zu, prefix %.3f, %s data\n", shape.name.c_str(),
                fp8 ? "on" : "off", static_cast<long long>(tokens), microbatch_count,
                static_cast<long long>(s.ws_short_tokens), static_cast<long long>(s.ws_long_tokens),
                s.mtp_weights.size(), s.prefix_weight, options.data_dir.empty() ? "synthetic" : "loader");
    std::vector<StepTimes> times;
    std::vector<double> losses;
    GPT_CUDA_CHECK(cudaDeviceSynchronize());
    reset_peak_memory_stats(Device::cuda);
    for (int it = 0; it < options.warmup + options.steps; ++it) {
      const StepSchedule& current = it % 2 == 0 ? s : s_odd;
      run_->runner.apply_schedule(current);
      PhaseEvents ev(batches.size());
      ev.step_begin.record(cuda::current_stream());
      const StepOutcome outcome = run_->runner.step(current, batches, ev.probes());
      ev.step_end.record(cuda::current_stream());
      ev.step_end.synchronize();
      losses.push_back(outcome.loss);
      if (it < options.warmup) continue;
      StepTimes t;
      t.step_ms = cuda::Event::elapsed_ms(ev.step_begin, ev.step_end);
      // A non-finite loss abandons the step: no optimizer phase was recorded.
      t.optimizer_ms = outcome.applied ? cuda::Event::elapsed_ms(ev.opt_begin, ev.step_end) : 0.0;
      for (size_t k = 0; k < batches.size(); ++k) {
        t.forward_ms += cuda::Event::elapsed_ms(ev.fwd_begin[k], ev.fwd_end[k]);
        t.backward_ms += cuda::Event::elapsed_ms(ev.fwd_end[k], ev.bwd_end[k]);
      }
      times.push_back(t);
    }
    const MemoryStats mem = memory_stats(Device::cuda);
    nlohmann::json row = report(shape, fp8, s, dims, microbatch_count, times, losses, mem, gemm_tflops);
    if (!options.kernel_trace.empty()) {
      const int it = options.warmup + options.steps;
      row["kernel_trace"] = traced_step(it % 2 == 0 ? s : s_odd, batches,
                                        options.kernel_trace + "-" + shape.name + (fp8 ? "-fp8on" : "-fp8off"));
    }
    return row;
  }

 private:
  // The step's microbatches (A = the recipe's slices per call at W = 1): synthetic, or the first loader call over
  // the train shards of --data.
  std::vector<Microbatch> microbatches(const StepSchedule& s, const Options& options) const {
    const Recipe& recipe = run_->recipe;
    std::vector<Microbatch> batches;
    if (options.data_dir.empty()) {
      for (int64_t i = 0; i < recipe.slices_per_call; ++i) {
        batches.push_back(synthetic_microbatch(s.slice_tokens, recipe.model.vocab_size,
                                               static_cast<int32_t>(recipe.model.bigram_rows), s.lmax,
                                               static_cast<int32_t>(s.cu_rows), 100 + static_cast<uint64_t>(i)));
      }
      return batches;
    }
    TrainLoaderOptions lo;
    lo.shards = find_split_shards(options.data_dir, ShardSplit::train);
    lo.slices_per_call = static_cast<int>(recipe.slices_per_call);
    lo.bigram_rows = static_cast<int32_t>(recipe.model.bigram_rows);
    lo.ngram_rows = recipe.extensions.ngram_rows;
    lo.prefetch = false;
    TrainLoader loader(lo);
    return loader.next(call_shape(s));
  }

  // One more step with its GPU activity recorded (--kernel-trace); raw intervals to PATH.csv.
  nlohmann::json traced_step(const StepSchedule& current, const std::vector<Microbatch>& batches,
                             const std::string& path);

  static nlohmann::json report(const StepBenchShape& shape, bool fp8, const StepSchedule& s, const ModelDims& dims,
                               int microbatch_count, const std::vector<StepTimes>& times,
                               const std::vector<double>& losses, const MemoryStats& mem, double gemm_tflops);

  std::unique_ptr<RecipeRun> run_;
};

#ifdef SPEEDRUN_HAVE_CUPTI
nlohmann::json Bench::traced_step(const StepSchedule& current, const std::vector<Microbatch>& batches,
                                  const std::string& path) {
  run_->runner.apply_schedule(current);
  KernelTrace trace;
  cuda::Event begin(true), end(true);
  trace.start();
  begin.record(cuda::current_stream());
  run_->runner.step(current, batches, {});
  end.record(cuda::current_stream());
  std::vector<ActivityInterval> intervals = trace.stop();
  const double step_ms = cuda::Event::elapsed_ms(begin, end);
  {
    std::ofstream csv(path + ".csv");
    GPT_CHECK(csv.good(), "train_step_bench: --kernel-trace: cannot write ", path, ".csv");
    csv << "kind,start_ns,end_ns,name\n";
    for (const ActivityInterval& a : intervals) {
      const char* kind = a.kind == ActivityKind::kernel   ? "kernel"
                         : a.kind == ActivityKind::memcpy ? "memcpy"
                                                          : "memset";
      std::string name = a.name;
      for (char& c : name) c = c == '"' ? '\'' : c;
      csv << kind << ',' << a.start_ns << ',' << a.end_ns << ",\"" << name << "\"\n";
    }
  }
  const TimelineSummary t = summarize_timeline(std::move(intervals));
  // Idle: the event-timed step less the time some GPU work was in flight.
  const double idle_ms = step_ms - t.busy_ms;
  std::printf(
      "  traced step: %.1f ms (event-timed), GPU busy %.1f ms, idle %.1f ms (%.1f%%); %lld kernels, %lld "
      "copies, %lld memsets; %lld idle gaps >= 5 us sum to %.1f ms%s\n",
      step_ms, t.busy_ms, idle_ms, 100 * idle_ms / step_ms, static_cast<long long>(t.kernels),
      static_cast<long long>(t.copies), static_cast<long long>(t.memsets),
      static_cast<long long>(t.idle_gaps_over_threshold), t.idle_over_threshold_ms,
      trace.dropped() > 0 ? " (CUPTI DROPPED RECORDS: incomplete)" : "");
  nlohmann::json top = nlohmann::json::array();
  for (const NameTotal& n : t.top) {
    std::printf("    %9.3f ms %5.1f%% x%-5lld %.110s\n", n.ms, 100 * n.ms / t.activity_ms,
                static_cast<long long>(n.count), n.name.c_str());
    top.push_back({{"name", n.name}, {"ms", n.ms}, {"count", n.count}});
  }
  nlohmann::json gaps = nlohmann::json::array();
  for (const IdleGap& g : t.longest_gaps) {
    std::printf("    idle %8.1f us after %.60s, before %.60s\n", g.us, g.before.c_str(), g.after.c_str());
    gaps.push_back({{"us", g.us}, {"before", g.before}, {"after", g.after}});
  }
  return {{"step_ms", step_ms},
          {"busy_ms", t.busy_ms},
          {"idle_ms", idle_ms},
          {"activity_ms", t.activity_ms},
          {"span_ms", t.span_ms},
          {"kernels", t.kernels},
          {"copies", t.copies},
          {"memsets", t.memsets},
          {"idle_gaps_over_5us", t.idle_gaps_over_threshold},
          {"idle_over_5us_ms", t.idle_over_threshold_ms},
          {"dropped_records", trace.dropped()},
          {"intervals_csv", path + ".csv"},
          {"top", top},
          {"longest_gaps", gaps}};
}
#else
nlohmann::json Bench::traced_step(const StepSchedule&, const std::vector<Microbatch>&, const std::string&) {
  GPT_FAIL("train_step_bench: --kernel-trace needs a build with CUPTI (the CUDA toolkit's extras/CUPTI)");
}
#endif

nlohmann::json samples_json(const std::vector<StepTimes>& times) {
  nlohmann::json out = nlohmann::json::array();
  for (const StepTimes& t : times) {
    out.push_back({{"step_ms", t.step_ms},
                   {"forward_ms", t.forward_ms},
                   {"backward_ms", t.backward_ms},
                   {"optimizer_ms", t.optimizer_ms}});
  }
  return out;
}

nlohmann::json Bench::report(const StepBenchShape& shape, bool fp8, const StepSchedule& s, const ModelDims& dims,
                             int microbatch_count, const std::vector<StepTimes>& times,
                             const std::vector<double>& losses, const MemoryStats& mem, double gemm_tflops) {
  const int64_t tokens = s.slice_tokens;
  // Mean over the timed steps (an even count covers as many Adam steps as steps without one).
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  };
  auto pick = [&](double StepTimes::*field) {
    std::vector<double> v;
    for (const StepTimes& t : times) v.push_back(t.*field);
    return mean(v);
  };
  const double step_ms = pick(&StepTimes::step_ms);
  const double tokens_per_step = static_cast<double>(tokens) * microbatch_count;
  const double flops_per_token = model_flops_per_token(dims, s.ws_short_tokens, s.ws_long_tokens);
  const double tflops = flops_per_token * tokens_per_step / (step_ms * 1e-3) / 1e12;
  constexpr double kMiB = 1024.0 * 1024.0;
  nlohmann::json j = {
      {"shape", shape.name},
      {"schedule_step", shape.schedule_step},
      {"fp8", fp8},
      {"slice_tokens", tokens},
      {"microbatches", microbatch_count},
      {"tokens_per_step", tokens_per_step},
      {"window_short", s.ws_short_tokens},
      {"window_long", s.ws_long_tokens},
      {"mtp_weights", s.mtp_weights},
      {"prefix_weight", s.prefix_weight},
      {"timed_steps", times.size()},
      {"ms_per_step", step_ms},
      {"forward_ms", pick(&StepTimes::forward_ms)},
      {"backward_ms", pick(&StepTimes::backward_ms)},
      {"optimizer_ms", pick(&StepTimes::optimizer_ms)},
      {"tokens_per_s", tokens_per_step / (step_ms * 1e-3)},
      {"model_flops_per_token", flops_per_token},
      {"model_tflop_s", tflops},
      {"mfu_vs_989", tflops / kDatasheetBf16TflopS},
      {"mfu_vs_measured_gemm", tflops / gemm_tflops},
      {"measured_gemm_bf16_tflop_s", gemm_tflops},
      {"peak_allocated_mib", static_cast<double>(mem.peak_allocated) / kMiB},
      {"peak_reserved_mib", static_cast<double>(mem.peak_reserved) / kMiB},
      {"losses", losses},
      {"samples", samples_json(times)},
  };
  std::printf(
      "  %.1f ms/step (fwd %.1f, bwd %.1f, opt %.1f), %.0f tok/s, %.1f model TFLOP/s, MFU %.1f%% of 989, "
      "%.1f%% of measured %.0f; peak alloc %.0f MiB, reserved %.0f MiB; losses",
      step_ms, pick(&StepTimes::forward_ms), pick(&StepTimes::backward_ms), pick(&StepTimes::optimizer_ms),
      tokens_per_step / (step_ms * 1e-3), tflops, 100 * tflops / kDatasheetBf16TflopS, 100 * tflops / gemm_tflops,
      gemm_tflops, static_cast<double>(mem.peak_allocated) / kMiB, static_cast<double>(mem.peak_reserved) / kMiB);
  for (double l : losses) std::printf(" %.4f", l);
  std::printf("\n");
  return j;
}

// Google Benchmark's JSON layout, so that `harness nightly --ingest` stores the step like any kernel benchmark:
// one iteration entry per timed step and phase, named BM_TrainStep/[<recipe>/]<stage>/fp8:<on|off>/data:<kind>
// [/phase] (no recipe part for `head`, whose rows keep the history's names).
nlohmann::json google_benchmark_entries(const nlohmann::json& row, const std::string& recipe,
                                        const std::string& data_kind) {
  nlohmann::json entries = nlohmann::json::array();
  if (!row.contains("samples")) return entries;  // a failed row
  const std::string base = "BM_TrainStep/" + (recipe == "head" ? "" : recipe + "/") +
                           row.at("shape").get<std::string>() + "/fp8:" + (row.at("fp8").get<bool>() ? "on" : "off") +
                           "/data:" + data_kind;
  for (const auto& [suffix, field] : {std::pair{"", "step_ms"},
                                      {"/forward", "forward_ms"},
                                      {"/backward", "backward_ms"},
                                      {"/optimizer", "optimizer_ms"}}) {
    for (const nlohmann::json& sample : row.at("samples")) {
      const std::string name = base + suffix;
      entries.push_back({{"name", name},
                         {"run_name", name},
                         {"run_type", "iteration"},
                         {"iterations", 1},
                         {"real_time", sample.at(field)},
                         {"cpu_time", sample.at(field)},
                         {"time_unit", "ms"}});
    }
  }
  return entries;
}

// The rows to time: --only's stages (each must be one of the recipe's), else the last scheduled stage and stage 0.
std::vector<StepBenchShape> wanted_shapes(const Options& options) {
  const std::vector<StepBenchShape> all = step_bench_shapes(Schedule(bench_recipe(options, true)));
  GPT_CHECK(!all.empty(), "train_step_bench: recipe '", options.recipe, "' has no stage to time");
  std::vector<std::string> names = options.only;
  if (names.empty()) {
    names = {all.back().name};
    if (all.size() > 1) names.push_back(all.front().name);
  }
  std::vector<StepBenchShape> shapes;
  for (const std::string& name : names) {
    const auto it = std::find_if(all.begin(), all.end(), [&](const StepBenchShape& s) { return s.name == name; });
    if (it == all.end()) {
      std::string known;
      for (const StepBenchShape& s : all) known += (known.empty() ? "" : ", ") + s.name;
      GPT_FAIL("train_step_bench: --only ", name, ": recipe '", options.recipe, "' has the stages ", known);
    }
    shapes.push_back(*it);
  }
  return shapes;
}

// Flags through CLI11; exits like every program of the project on --help (0) and bad usage (2).
Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{"train_step_bench: one training step of a recipe's model on one GPU, timed with CUDA events"};
  app.add_option("--recipe", o.recipe, "recipe NAME|FILE whose step is timed")->capture_default_str();
  app.add_option("--set", o.overrides,
                 "override a recipe key: dotted.key=value (repeatable; e.g. extensions.ngram_rows=10575360, one "
                 "rank's n-gram shard of ext)");
  app.add_option("--steps", o.steps, "timed steps per row")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed steps before them")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--json", o.json_path, "write the rows as Google Benchmark JSON to FILE");
  app.add_option("--only", o.only, "stages to time, comma-separated (stage0, stage1, ...)")->delimiter(',');
  app.add_option("--fp8", o.fp8, "FP8 products (the recipe's §7) on, off or both rows")
      ->check(CLI::IsMember({"on", "off", "both"}))
      ->capture_default_str();
  app.add_option("--data", o.data_dir, "train shards of DIR instead of synthetic ids");
  app.add_option(
      "--kernel-trace", o.kernel_trace,
      "after each row, trace one more step (CUPTI): kernels, GPU busy/idle; raw intervals to PREFIX-<row>.csv");
  app.add_option("--cu-rows-multiplier", o.cu_rows_multiplier, "schedule.cu_rows_multiplier of the rows")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  return o;
}

}  // namespace
}  // namespace gpt

int main(int argc, char** argv) {
  using namespace gpt;
  try {
    const Options options = parse(argc, argv);
    GPT_CHECK(cuda_available(), "train_step_bench: no CUDA device visible");
    const cudaDeviceProp& prop = cuda::device_properties();
    const double gemm_tflops = measured_gemm_tflops();
    std::printf("device: %s; cuBLASLt bf16 8192^3: %.1f TFLOP/s\n", prop.name, gemm_tflops);
    const std::vector<StepBenchShape> shapes = wanted_shapes(options);
    Bench bench;
    nlohmann::json results = nlohmann::json::array();
    for (const StepBenchShape& shape : shapes) {
      for (bool fp8 : {true, false}) {
        if ((fp8 && options.fp8 == "off") || (!fp8 && options.fp8 == "on")) continue;
        try {
          results.push_back(bench.run(shape, fp8, options, gemm_tflops));
        } catch (const std::exception& e) {
          std::printf("  %s fp8=%s FAILED: %s\n", shape.name.c_str(), fp8 ? "on" : "off", e.what());
          results.push_back({{"shape", shape.name}, {"fp8", fp8}, {"error", e.what()}});
          GPT_CUDA_CHECK(cudaDeviceSynchronize());
        }
      }
    }
    int driver = 0;
    GPT_CUDA_CHECK(cudaDriverGetVersion(&driver));
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const BuildInfo& build = build_info();
    const std::string data_kind = options.data_dir.empty() ? "synthetic" : "loader";
    const std::string recipe_name = bench_recipe(options, true).name;
    nlohmann::json benchmarks = nlohmann::json::array();
    for (const nlohmann::json& row : results) {
      for (nlohmann::json& entry : google_benchmark_entries(row, recipe_name, data_kind)) {
        benchmarks.push_back(std::move(entry));
      }
    }
    // `context` and `benchmarks` follow Google Benchmark's JSON; `results` keeps the full rows.
    nlohmann::json doc = {{"context",
                           {{"date", utc_iso8601_now()},
                            {"host_name", host},
                            {"executable", "train_step_bench"},
                            {"git_commit", build.git_commit + (build.git_dirty ? "-dirty" : "")},
                            {"gpu", prop.name},
                            {"cuda_driver_version", driver},
                            {"build_type", build.build_type}}},
                          {"device", prop.name},
                          {"recipe", recipe_name},
                          {"data", options.data_dir.empty() ? "synthetic" : options.data_dir},
                          {"measured_gemm_bf16_tflop_s", gemm_tflops},
                          {"datasheet_bf16_tflop_s", kDatasheetBf16TflopS},
                          {"results", results},
                          {"benchmarks", benchmarks}};
    if (!options.json_path.empty()) std::ofstream(options.json_path) << doc.dump(2) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "train_step_bench: " << e.what() << std::endl;
    return 1;
  }
}
#else   // SPEEDRUN_HAVE_CUDA
int main() {
  std::fprintf(stderr, "train_step_bench: this build has no CUDA backend\n");
  return 0;
}
#endif  // SPEEDRUN_HAVE_CUDA
