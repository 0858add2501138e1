// Attention forward/backward at the recipe's training shape (RECIPE §1.4, §5.1 stage 2): T = 49,152 tokens per
// microbatch, 6 heads × 128, windows 640 and 1408 tokens, documents of typical lengths ≤ 2048 (a fixed-seed draw,
// mean ≈ 700 tokens), cu_seqlens padded with T to R = 128 entries.
//
// FLOPs count allowed (query, key) pairs only: 4·D per pair forward (Q·Kᵀ and P·V), 10·D per pair backward (the
// standard five products; the kernel itself recomputes two more for its atomic-free dQ pass).
// "vs_dense_gemm" divides by the dense bf16 GEMM rate measured once in this process (8192³ through gpt::gemm).
//   ./attention_bench --benchmark_format=json
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/bench/bench_util.cuh"
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
    for (int64_t t = cu[i]; t < cu[i + 1]; ++t) pairs += static_cast<double>(t - std::max<int64_t>(cu[i], t - window) + 1);
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

void BM_AttentionForward(benchmark::State& state) {
  const int64_t window = state.range(0);
  Inputs in;
  const float scale = 0.12f;
  const double flops = 4.0 * kDim * kHeads * allowed_pairs(in.cu_host, window);
  bench::time_with_events(state, [&] { attention_forward(in.q, in.k, in.v, in.cu, in.y, in.lse, window, scale); },
                          flops);
  state.counters["vs_dense_gemm"] = state.counters["TFLOP/s"] / dense_gemm_tflops();
  state.counters["documents"] = static_cast<double>(std::count_if(in.cu_host.begin() + 1, in.cu_host.end(),
                                                                  [&, prev = 0](int32_t c) mutable {
                                                                    const bool nonempty = c > prev;
                                                                    prev = c;
                                                                    return nonempty;
                                                                  }));
}

void BM_AttentionBackward(benchmark::State& state) {
  const int64_t window = state.range(0);
  Inputs in;
  const float scale = 0.12f;
  attention_forward(in.q, in.k, in.v, in.cu, in.y, in.lse, window, scale);
  const double flops = 10.0 * kDim * kHeads * allowed_pairs(in.cu_host, window);
  bench::time_with_events(
      state,
      [&] { attention_backward(in.dy, in.q, in.k, in.v, in.cu, in.y, in.lse, in.dq, in.dk, in.dv, window, scale); },
      flops);
  state.counters["vs_dense_gemm"] = state.counters["TFLOP/s"] / dense_gemm_tflops();
}

BENCHMARK(BM_AttentionForward)->ArgName("window")->Arg(640)->Arg(1408)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionBackward)->ArgName("window")->Arg(640)->Arg(1408)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpt

BENCHMARK_MAIN();
