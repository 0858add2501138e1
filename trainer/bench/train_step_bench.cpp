// train_step_bench: one full training step of the `head` model on one GPU (RECIPE §1.3: 8 microbatches of T
// tokens, forward + backward + optimizer step), timed with CUDA events. The step is the run's own: the model,
// optimizer and tail average a one-rank run of `head` builds, driven by the step runner (trainer/step/
// step_runner.h: schedule, gradients_final overlap, loss reduction, optimizer step, §7.2 FP8 refresh).
//
//   train_step_bench [--steps N] [--warmup N] [--json FILE] [--only stage0,stage1,stage2] [--fp8 on|off|both]
//                    [--data DIR] [--cu-rows-multiplier N]
//
// Shapes: stage 2 of the record recipe (T = 49,152, windows 640/1408 tokens, MTP [1]), stage 1 (T = 32,768,
// windows 384/896, MTP [1, 0.5]) and stage 0 (T = 16,384, windows 128/384, MTP [1, 0.5, 0.25]); by default stage 2
// and stage 0. Data: synthetic token ids with a BOS roughly every 700 tokens, or with --data the first call of the
// train loader over DIR's train shards (real documents: real segment lengths for attention, real bigram rows).
// FP8: "on" is the recipe (§7.1 lm_head and §7.2 MLP products), "off" bf16 GEMMs.
// Reports ms/step, tokens/s, model TFLOP/s from the §10.2 counter (kernels/flops.h), MFU against the 989 TFLOP/s
// dense bf16 datasheet figure and against this run's measured cuBLASLt 8192³ bf16 rate, per-phase times (forward,
// backward, optimizer; summed over the step's microbatches), peak memory (caching allocator statistics) and each
// step's mean training loss (as the run logs it).
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
#include "trainer/schedule/schedule.h"
#include "trainer/step/step_runner.h"

namespace gpt {
namespace {

constexpr double kDatasheetBf16TflopS = 989.0;  // H100/H200 SXM dense bf16

struct Options {
  int steps = 6;
  int warmup = 2;
  std::string json_path;
  std::vector<std::string> only;  // empty: stage2 and stage0
  std::string fp8 = "both";       // on | off | both
  std::string data_dir;           // empty: synthetic microbatches
  int cu_rows_multiplier = 1;     // schedule.cu_rows_multiplier (4 for the proxy corpus's shorter documents)
};

struct BenchShape {
  std::string name;
  int64_t schedule_step;  // a step of the `head` schedule inside the stage (windows, MTP, prefix weight)
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
    return StepProbes{
        .microbatch_begin = [this](size_t i) { fwd_begin[i].record(cuda::current_stream()); },
        .forward_end = [this](size_t i) { fwd_end[i].record(cuda::current_stream()); },
        .microbatch_end = [this](size_t i) { bwd_end[i].record(cuda::current_stream()); },
        .optimizer_begin = [this] { opt_begin.record(cuda::current_stream()); }};
  }
};

struct StepTimes {
  double step_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
};

// What a run of the `head` recipe builds for one rank (TrainingRun's make_model at W = 1, the optimizer, the tail
// average), driven by the run's own step runner: the bench times the step the run executes.
struct HeadRun {
  Recipe recipe;
  Schedule schedule;
  std::unique_ptr<Comm> comm = make_single_rank_comm();
  GptTrainable model;
  Optimizer optimizer;
  TailAverage tail;
  StepRunner runner;

  explicit HeadRun(Recipe head)
      : recipe(std::move(head)),
        schedule(recipe),
        model(recipe, 1, recipe.slices_per_call, DType::bf16, Device::cuda, comm.get()),
        optimizer(model.parameters(), recipe, *comm),
        tail(model.parameters(), recipe, *comm),
        runner(model, optimizer, tail, *comm, Device::cuda, schedule.total_steps()) {
    if (model.uses_prefix_table()) {
      // A prefix table of valid token ids (the real one maps tokens to their longest proper prefix token, §3.2).
      std::vector<int64_t> prefix(static_cast<size_t>(recipe.model.vocab_size));
      std::mt19937_64 rng(5);
      for (int64_t& p : prefix) p = static_cast<int64_t>(rng() % 50257);
      model.set_prefix_table(prefix);
    }
  }
};

class Bench {
 public:
  explicit Bench(const Options& options) : cu_rows_multiplier_(options.cu_rows_multiplier) {}

  nlohmann::json run(const BenchShape& shape, bool fp8, const Options& options, double gemm_tflops) {
    // A fresh model per row, from the seeded initial state, with the recipe's FP8 switch set for the row.
    run_.reset();
    const std::vector<std::string> overrides = {
        "schedule.cu_rows_multiplier=" + std::to_string(cu_rows_multiplier_), fp8 ? "fp8=true" : "fp8=false"};
    run_ = std::make_unique<HeadRun>(load_recipe("head", overrides));
    const ModelDims dims = model_dims(run_->recipe.model, 1);
    std::printf("initialised the head model (%lld parameters) on the GPU\n",
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
    return report(shape, fp8, s, dims, microbatch_count, times, losses, mem, gemm_tflops);
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

  static nlohmann::json report(const BenchShape& shape, bool fp8, const StepSchedule& s, const ModelDims& dims,
                               int microbatch_count, const std::vector<StepTimes>& times,
                               const std::vector<double>& losses, const MemoryStats& mem, double gemm_tflops);

  int cu_rows_multiplier_ = 1;
  std::unique_ptr<HeadRun> run_;
};

nlohmann::json samples_json(const std::vector<StepTimes>& times) {
  nlohmann::json out = nlohmann::json::array();
  for (const StepTimes& t : times) {
    out.push_back({{"step_ms", t.step_ms}, {"forward_ms", t.forward_ms}, {"backward_ms", t.backward_ms},
                   {"optimizer_ms", t.optimizer_ms}});
  }
  return out;
}

nlohmann::json Bench::report(const BenchShape& shape, bool fp8, const StepSchedule& s, const ModelDims& dims,
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
  std::printf("  %.1f ms/step (fwd %.1f, bwd %.1f, opt %.1f), %.0f tok/s, %.1f model TFLOP/s, MFU %.1f%% of 989, "
              "%.1f%% of measured %.0f; peak alloc %.0f MiB, reserved %.0f MiB; losses",
              step_ms, pick(&StepTimes::forward_ms), pick(&StepTimes::backward_ms), pick(&StepTimes::optimizer_ms),
              tokens_per_step / (step_ms * 1e-3), tflops, 100 * tflops / kDatasheetBf16TflopS,
              100 * tflops / gemm_tflops, gemm_tflops, static_cast<double>(mem.peak_allocated) / kMiB,
              static_cast<double>(mem.peak_reserved) / kMiB);
  for (double l : losses) std::printf(" %.4f", l);
  std::printf("\n");
  return j;
}

// Google Benchmark's JSON layout, so that `harness nightly --ingest` stores the step like any kernel benchmark:
// one iteration entry per timed step and phase, named BM_TrainStep/<stage>/fp8:<on|off>/data:<kind>[/phase].
nlohmann::json google_benchmark_entries(const nlohmann::json& row, const std::string& data_kind) {
  nlohmann::json entries = nlohmann::json::array();
  if (!row.contains("samples")) return entries;  // a failed row
  const std::string base = "BM_TrainStep/" + row.at("shape").get<std::string>() + "/fp8:" +
                           (row.at("fp8").get<bool>() ? "on" : "off") + "/data:" + data_kind;
  for (const auto& [suffix, field] : {std::pair{"", "step_ms"}, {"/forward", "forward_ms"},
                                      {"/backward", "backward_ms"}, {"/optimizer", "optimizer_ms"}}) {
    for (const nlohmann::json& sample : row.at("samples")) {
      const std::string name = base + suffix;
      entries.push_back({{"name", name}, {"run_name", name}, {"run_type", "iteration"}, {"iterations", 1},
                         {"real_time", sample.at(field)}, {"cpu_time", sample.at(field)}, {"time_unit", "ms"}});
    }
  }
  return entries;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      GPT_CHECK(i + 1 < argc, "train_step_bench: ", a, " needs a value");
      return argv[++i];
    };
    if (a == "--steps") {
      o.steps = std::stoi(value());
    } else if (a == "--warmup") {
      o.warmup = std::stoi(value());
    } else if (a == "--json") {
      o.json_path = value();
    } else if (a == "--only") {
      std::string list = value();
      for (size_t start = 0; start <= list.size();) {
        const size_t comma = std::min(list.find(',', start), list.size());
        o.only.push_back(list.substr(start, comma - start));
        GPT_CHECK(o.only.back() == "stage0" || o.only.back() == "stage1" || o.only.back() == "stage2",
                  "train_step_bench: --only expects a comma-separated list of stage0, stage1, stage2; got '", list, "'");
        start = comma + 1;
      }
    } else if (a == "--data") {
      o.data_dir = value();
    } else if (a == "--cu-rows-multiplier") {
      o.cu_rows_multiplier = std::stoi(value());
    } else if (a == "--fp8") {
      o.fp8 = value();
      GPT_CHECK(o.fp8 == "on" || o.fp8 == "off" || o.fp8 == "both", "train_step_bench: --fp8 expects on, off or both");
    } else {
      GPT_FAIL("train_step_bench: unknown argument '", a,
               "' (usage: [--steps N] [--warmup N] [--json FILE] [--only stage0,stage1,stage2] [--fp8 on|off|both] "
               "[--data DIR] [--cu-rows-multiplier N])");
    }
  }
  GPT_CHECK(o.steps >= 1 && o.warmup >= 0, "train_step_bench: --steps must be >= 1 and --warmup >= 0");
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
    Bench bench(options);
    // Steps of the `head` schedule: 300/301 lie in stage 0 (steps 0-422), 600/601 in stage 1 (423-846), 1000/1001
    // in stage 2 (847-1269, after the lm_head split).
    const std::vector<BenchShape> all = {{"stage2", 1000}, {"stage1", 600}, {"stage0", 300}};
    const std::vector<std::string> wanted = options.only.empty() ? std::vector<std::string>{"stage2", "stage0"} : options.only;
    std::vector<BenchShape> shapes;
    for (const BenchShape& shape : all) {
      if (std::find(wanted.begin(), wanted.end(), shape.name) != wanted.end()) shapes.push_back(shape);
    }
    nlohmann::json results = nlohmann::json::array();
    for (const BenchShape& shape : shapes) {
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
    nlohmann::json benchmarks = nlohmann::json::array();
    for (const nlohmann::json& row : results) {
      for (nlohmann::json& entry : google_benchmark_entries(row, data_kind)) benchmarks.push_back(std::move(entry));
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
