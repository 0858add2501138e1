// CPU reference attention (kernels/attention.h): forward and backward on small packed sequences.
// FLOP/s counts only unmasked work: for every (query, key, head) the kernel actually visits, 2·D per
// matrix product (forward: QKᵀ and PV; backward: QKᵀ recomputed, dP = dY·Vᵀ, dV, dQ, dK).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/attention.h"

namespace {

using gpt::DType;
using gpt::Tensor;

constexpr int64_t kHeads = 6;
constexpr int64_t kHeadDim = 128;
constexpr int64_t kDocument = 300;  // documents of 300 tokens, the last one shorter

Tensor random_bf16(const gpt::Shape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(gpt::shape_numel(shape)));
  for (float& v : values) v = normal(rng);
  return Tensor::from_floats(values, shape, DType::bf16);
}

std::vector<int32_t> document_boundaries(int64_t tokens) {
  std::vector<int32_t> cu{0};
  for (int64_t end = kDocument; end < tokens; end += kDocument) cu.push_back(static_cast<int32_t>(end));
  cu.push_back(static_cast<int32_t>(tokens));
  cu.push_back(static_cast<int32_t>(tokens));  // a trailing empty segment, as the loader produces
  return cu;
}

// (query, key) pairs inside the mask, per head.
double visited_pairs(const std::vector<int32_t>& cu, int64_t window) {
  double pairs = 0;
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    for (int64_t t = cu[i]; t < cu[i + 1]; ++t)
      pairs += static_cast<double>(t - std::max<int64_t>(cu[i], t - window) + 1);
  }
  return pairs;
}

struct Problem {
  Tensor q, k, v, cu, y, lse;
  double pairs = 0;
};

Problem make_problem(int64_t tokens, int64_t window) {
  Problem p;
  const gpt::Shape shape{tokens, kHeads, kHeadDim};
  p.q = random_bf16(shape, 1);
  p.k = random_bf16(shape, 2);
  p.v = random_bf16(shape, 3);
  const std::vector<int32_t> cu = document_boundaries(tokens);
  p.cu = Tensor::empty({static_cast<int64_t>(cu.size())}, DType::i32);
  std::copy(cu.begin(), cu.end(), p.cu.data<int32_t>());
  p.y = Tensor::empty(shape, DType::bf16);
  p.lse = Tensor::empty({kHeads, tokens}, DType::f32);
  p.pairs = visited_pairs(cu, window);
  return p;
}

void BM_AttentionForwardCpu(benchmark::State& state) {
  const int64_t tokens = state.range(0), window = state.range(1);
  Problem p = make_problem(tokens, window);
  for (auto _ : state) {
    gpt::attention_forward(p.q, p.k, p.v, p.cu, p.y, p.lse, window, 0.12f);
    benchmark::DoNotOptimize(p.y.raw());
  }
  const double flops = p.pairs * kHeads * 4.0 * kHeadDim;
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_AttentionBackwardCpu(benchmark::State& state) {
  const int64_t tokens = state.range(0), window = state.range(1);
  Problem p = make_problem(tokens, window);
  gpt::attention_forward(p.q, p.k, p.v, p.cu, p.y, p.lse, window, 0.12f);
  const Tensor dy = random_bf16(p.q.shape(), 4);
  Tensor dq = Tensor::zeros(p.q.shape(), DType::bf16), dk = Tensor::zeros(p.q.shape(), DType::bf16),
         dv = Tensor::zeros(p.q.shape(), DType::bf16);
  for (auto _ : state) {
    gpt::attention_backward(dy, p.q, p.k, p.v, p.cu, p.y, p.lse, dq, dk, dv, window, 0.12f);
    benchmark::DoNotOptimize(dq.raw());
  }
  const double flops = p.pairs * kHeads * 10.0 * kHeadDim;
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens"] = static_cast<double>(tokens);
}

// {tokens, window}: the tiny recipe's short/long windows (16·3, 16·7 blocks) and the head recipe's short
// window (128 tokens) on a few documents.
BENCHMARK(BM_AttentionForwardCpu)->Args({512, 48})->Args({512, 112})->Args({1024, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionBackwardCpu)->Args({512, 48})->Args({512, 112})->Args({1024, 128})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
