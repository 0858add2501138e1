// Attention forward/backward at the recipe's training shape (RECIPE §1.4, §5.1 stage 2): T = 49,152 tokens per
// microbatch, 6 heads × 128, windows 640 and 1408 tokens, documents of typical lengths ≤ 2048 (a fixed-seed draw,
// mean ≈ 700 tokens), cu_seqlens padded with T to R = 128 entries.
//
// FLOPs count allowed (query, key) pairs only: 4·D per pair forward (Q·Kᵀ and P·V), 10·D per pair backward (the
// standard five products; the kernel itself recomputes two more for its atomic-free dQ pass).
// "vs_dense_gemm" divides by the dense bf16 GEMM rate measured once in this process (8192³ through gpt::gemm).
// Every version of the attention kernel ladder (kernels/cuda/ladder/attention_versions.h) is timed, argument
// `version` N = version vN (label vN; "(promoted NAME)" / "(candidate NAME)" mark the production kernels of
// kernels/cuda/attention/kernels.h), so one run shows before and after; targets: forward ≥ 0.40, backward ≥ 0.30 of
// the dense rate.
// BM_DcForward / BM_DcBackward time the layer-10 DC correction (kernels/dc_attention.h, 112 keys) per version of
// kernels/cuda/dc_attention_variants.h, FLOPs counted as 4·D (forward) and 10·D (backward) per allowed pair and head.
//   ./attention_bench --benchmark_format=json
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/bench/bench_util.cuh"
#include "kernels/cuda/attention/kernels.h"
#include "kernels/cuda/dc_attention_variants.h"
#include "kernels/cuda/ladder/attention_versions.h"
#include "kernels/dc_attention.h"
#include "kernels/gemm.h"

namespace gpt {
namespace {

constexpr int64_t kTokens = 49152, kHeads = 6, kDim = 128, kEntries = 128;

std::vector<int32_t> document_boundaries() {
  std::mt19937_64 rng(20260);
  std::exponential_distribution<double> length(1.0 / 700.0);
  std::vector<int32_t> cu = {0};
  while (cu.back() < kTokens) {
    const int64_t len = std::clamp<int64_t>(static_cast<int64_t>(length(rng)), 16, 2048);
    cu.push_back(static_cast<int32_t>(std::min(kTokens, cu.back() + len)));
  }
  GPT_CHECK(static_cast<int64_t>(cu.size()) <= kEntries, "attention_bench: too many documents for R = ", kEntries);
  while (static_cast<int64_t>(cu.size()) < kEntries) cu.push_back(static_cast<int32_t>(kTokens));
  return cu;
}

// Allowed (query, key) pairs of one head: Σ_t (t − max(segment start, t − window) + 1).
double allowed_pairs(const std::vector<int32_t>& cu, int64_t window) {
  double pairs = 0;
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    for (int64_t t = cu[i]; t < cu[i + 1]; ++t)
      pairs += static_cast<double>(t - std::max<int64_t>(cu[i], t - window) + 1);
  }
  return pairs;
}

double dense_gemm_tflops() {
  static const double rate = [] {
    constexpr int64_t n = 8192;
    Tensor a = Tensor::empty({n, n}, DType::bf16, Device::cuda), b = Tensor::empty({n, n}, DType::bf16, Device::cuda);
    Tensor c = Tensor::empty({n, n}, DType::bf16, Device::cuda);
    bench::fill_uniform(a, 11);
    bench::fill_uniform(b, 12);
    for (int i = 0; i < 3; ++i) gemm(a, b, c, {.trans_b = true});
    std::vector<float> ms;
    cuda::Event start(true), stop(true);
    for (int i = 0; i < 20; ++i) {
      start.record(cuda::current_stream());
      gemm(a, b, c, {.trans_b = true});
      stop.record(cuda::current_stream());
      stop.synchronize();
      ms.push_back(cuda::Event::elapsed_ms(start, stop));
    }
    std::sort(ms.begin(), ms.end());
    return 2.0 * n * n * n / (ms[ms.size() / 2] / 1e3) / 1e12;
  }();
  return rate;
}

struct Inputs {
  std::vector<int32_t> cu_host = document_boundaries();
  Tensor cu, q, k, v, y, lse, dy, dq, dk, dv;
  Inputs() {
    Tensor host = Tensor::empty({kEntries}, DType::i32);
    std::copy(cu_host.begin(), cu_host.end(), host.data<int32_t>());
    cu = host.to(Device::cuda);
    const Shape shape{kTokens, kHeads, kDim};
    for (Tensor* t : {&q, &k, &v, &y, &dy, &dq, &dk, &dv}) *t = Tensor::empty(shape, DType::bf16, Device::cuda);
    lse = Tensor::empty({kHeads, kTokens}, DType::f32, Device::cuda);
    uint64_t seed = 21;
    for (Tensor* t : {&q, &k, &v, &dy, &dq, &dk, &dv}) bench::fill_uniform(*t, seed++, 1.7f);  // unit variance
  }
};

// FLOP and byte floors of one call (kernels/cuda/NOTES.md): the bytes are each input read once and each output
// written once; "floor_us" is the larger of FLOPs / (this run's dense GEMM rate) and bytes / 3.94 TB/s (docs/ANCHORS.md
// copy rate), i.e. the time of a kernel as efficient as the dense GEMM.
void set_floor(benchmark::State& state, double flops, double bytes) {
  state.counters["GFLOP"] = flops / 1e9;
  state.counters["MB"] = bytes / 1e6;
  state.counters["floor_us"] = std::max(flops / (dense_gemm_tflops() * 1e12), bytes / 3.94e12) * 1e6;
}

int64_t count_documents(const std::vector<int32_t>& cu) {
  int64_t n = 0;
  for (size_t i = 0; i + 1 < cu.size(); ++i) n += cu[i + 1] > cu[i];
  return n;
}

// "vN (promoted NAME)" / "vN (candidate NAME)" for the production kernels (NAME: what SPEEDRUN_ATTENTION_FORWARD /
// _BACKWARD take, scripts/gpu-session reads it), "vN" for the others.
template <typename Kernel, typename Fn>
std::string version_label(const char* name, Fn fn, const Kernel& promoted, const Kernel& candidate) {
  if (fn == promoted.fn) return std::string(name) + " (promoted " + promoted.name + ")";
  if (fn == candidate.fn) return std::string(name) + " (candidate " + candidate.name + ")";
  return name;
}

std::string version_name(const benchmark::State& state) { return "v" + std::to_string(state.range(0)); }

// Benchmark argument 0 = version number N of the ladder's version vN, argument 1 = window.
void BM_AttentionForward(benchmark::State& state) {
  const auto& version = cuda::ladder::forward_version(version_name(state).c_str());
  const int64_t window = state.range(1);
  Inputs in;
  const float scale = 0.12f;
  const double flops = 4.0 * kDim * kHeads * allowed_pairs(in.cu_host, window);
  const double elems = static_cast<double>(kTokens * kHeads * kDim);
  bench::time_with_events(
      state, [&] { version.fn(in.q, in.k, in.v, in.cu, in.y, in.lse, window, scale); }, flops);
  state.SetLabel(version_label(version.name, version.fn, cuda::kPromotedForward, cuda::kCandidateForward));
  state.counters["vs_dense_gemm"] = state.counters["TFLOP/s"] / dense_gemm_tflops();
  set_floor(state, flops, 4 * 2 * elems + 4.0 * kTokens * kHeads);  // q, k, v, y bf16 + lse f32
  state.counters["documents"] = static_cast<double>(count_documents(in.cu_host));
}

void BM_AttentionBackward(benchmark::State& state) {
  const auto& version = cuda::ladder::backward_version(version_name(state).c_str());
  const int64_t window = state.range(1);
  Inputs in;
  const float scale = 0.12f;
  cuda::attention_forward(in.q, in.k, in.v, in.cu, in.y, in.lse, window, scale);
  const double flops = 10.0 * kDim * kHeads * allowed_pairs(in.cu_host, window);
  const double elems = static_cast<double>(kTokens * kHeads * kDim);
  bench::time_with_events(
      state, [&] { version.fn(in.dy, in.q, in.k, in.v, in.cu, in.y, in.lse, in.dq, in.dk, in.dv, window, scale, {}); },
      flops);
  state.SetLabel(version_label(version.name, version.fn, cuda::kPromotedBackward, cuda::kCandidateBackward));
  state.counters["vs_dense_gemm"] = state.counters["TFLOP/s"] / dense_gemm_tflops();
  // dy, q, k, v, y read + dq, dk, dv read and written (they accumulate), bf16; lse read, f32.
  set_floor(state, flops, (5 + 2 * 3) * 2 * elems + 4.0 * kTokens * kHeads);
}

// Every version of `versions` (named v1 … vN) at both windows.
template <typename Version, size_t N>
void versions_and_windows(benchmark::internal::Benchmark* b, const Version (&versions)[N]) {
  b->ArgNames({"version", "window"});
  for (int64_t window : {640, 1408}) {
    for (const Version& v : versions) b->Args({std::stoll(std::string(v.name).substr(1)), window});
  }
}

// The DC correction's inputs beyond attention's: 16 gate lanes (w1 at 1, w2 at 9, as the GPU test), y_core.
struct DcInputs : Inputs {
  Tensor gates = Tensor::empty({kTokens, 16}, DType::bf16, Device::cuda);
  Tensor dgates = Tensor::empty({kTokens, 16}, DType::bf16, Device::cuda);
  DcInputs() {
    bench::fill_uniform(gates, 40, 1.0f);
    bench::fill_uniform(dgates, 41, 0.01f);
  }
};
constexpr DcLanes kBenchLanes{.w1 = 1, .w2 = 9};

void BM_DcForward(benchmark::State& state) {
  DcInputs in;
  const double flops = 4.0 * kDim * kHeads * allowed_pairs(in.cu_host, kDcKeys - 1);
  const auto run = state.range(0) == 1 ? cuda::dc_attention_forward_v1 : cuda::dc_attention_forward_v2;
  bench::time_with_events(
      state, [&] { run(in.q, in.k, in.v, in.cu, in.gates, kBenchLanes, in.dy, in.y, in.lse, 0.12f, kDcKeys); }, flops);
  state.SetLabel(state.range(0) == 1 ? "v1" : "v2 (promoted)");
  state.counters["vs_dense_gemm"] = state.counters["TFLOP/s"] / dense_gemm_tflops();
}

void BM_DcBackward(benchmark::State& state) {
  DcInputs in;
  cuda::dc_attention_forward(in.q, in.k, in.v, in.cu, in.gates, kBenchLanes, in.dy, in.y, in.lse, 0.12f, kDcKeys);
  const double flops = 10.0 * kDim * kHeads * allowed_pairs(in.cu_host, kDcKeys - 1);
  const auto run = state.range(0) == 1 ? cuda::dc_attention_backward_v1 : cuda::dc_attention_backward_v2;
  bench::time_with_events(
      state,
      [&] {
        run(in.dy, in.q, in.k, in.v, in.cu, in.gates, kBenchLanes, in.lse, in.dq, in.dk, in.dv, in.dgates, 0.12f,
            kDcKeys);
      },
      flops);
  state.SetLabel(state.range(0) == 1 ? "v1" : "v2 (promoted)");
  state.counters["vs_dense_gemm"] = state.counters["TFLOP/s"] / dense_gemm_tflops();
}

BENCHMARK(BM_DcForward)->ArgName("version")->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DcBackward)->ArgName("version")->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK(BM_AttentionForward)
    ->Apply([](benchmark::internal::Benchmark* b) { versions_and_windows(b, cuda::ladder::kAttentionForwardVersions); })
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionBackward)
    ->Apply([](benchmark::internal::Benchmark* b) {
      versions_and_windows(b, cuda::ladder::kAttentionBackwardVersions);
    })
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpt

BENCHMARK_MAIN();
