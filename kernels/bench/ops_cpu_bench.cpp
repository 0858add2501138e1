// CPU reference ops of the layer loop and the loss, at small and medium shapes, for the nightly regression job.
// Counters: bytes/s (activations read + written) or FLOP/s where the op is compute-bound.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/activation.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/fp8.h"
#include "kernels/smear.h"
#include "kernels/softcap_loss.h"

namespace gpt {
namespace {

Tensor random_bf16(Shape shape, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = normal(rng);
  return Tensor::from_doubles(v, std::move(shape), DType::bf16);
}

Tensor random_ids(int64_t n, int64_t limit, uint64_t seed, DType dtype) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, limit - 1);
  Tensor t = Tensor::empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::i32) {
      t.data<int32_t>()[i] = static_cast<int32_t>(pick(rng));
    } else {
      t.data<int64_t>()[i] = pick(rng);
    }
  }
  return t;
}

Tensor f32_scalar(float v) { return Tensor::from_floats(std::vector<float>{v}, {1}, DType::f32); }

void set_bytes(benchmark::State& state, int64_t bytes_per_iteration) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes_per_iteration);
}

// Residual mix of the layer loop: x ← ρ·x + π·a + g0·x0 + gb·Bg on [T, 768] bf16.
void BM_MixResidual(benchmark::State& state) {
  const int64_t rows = state.range(0), d = 768;
  Tensor x = random_bf16({rows, d}, 1), a = random_bf16({rows, d}, 2), x0 = random_bf16({rows, d}, 3);
  Tensor bg = random_bf16({rows, d}, 4), gate = random_bf16({rows, 26}, 5);
  Tensor rho = f32_scalar(1.05f), pi = f32_scalar(1.0f);
  Tensor out = Tensor::empty({rows, d}, DType::bf16);  // not in place: repeated calls must not grow x
  const std::vector<MixTerm> terms = {{x, Coef::of_scalar(rho)},
                                      {a, Coef::of_scalar(pi)},
                                      {x0, Coef::of_lane(gate, 18)},
                                      {bg, Coef::of_lane(gate, 19)}};
  for (auto _ : state) mix_forward(terms, out);
  set_bytes(state, rows * d * 2 * 5);
}
BENCHMARK(BM_MixResidual)->Arg(1024)->Arg(8192)->Unit(benchmark::kMicrosecond);

void BM_MixResidualBackward(benchmark::State& state) {
  const int64_t rows = state.range(0), d = 768;
  Tensor x = random_bf16({rows, d}, 1), a = random_bf16({rows, d}, 2), dout = random_bf16({rows, d}, 3);
  Tensor da = Tensor::zeros({rows, d}, DType::bf16);
  Tensor rho = f32_scalar(1.05f), pi = f32_scalar(1.0f), drho = f32_scalar(0), dpi = f32_scalar(0);
  const std::vector<MixTerm> terms = {{x, Coef::of_scalar(rho)}, {a, Coef::of_scalar(pi)}};
  const std::vector<MixGrad> grads = {{.dx = dout, .overwrite_dx = true, .dscalar = drho}, {.dx = da, .dscalar = dpi}};
  for (auto _ : state) mix_backward(dout, terms, grads);
  set_bytes(state, rows * d * 2 * 6);
}
BENCHMARK(BM_MixResidualBackward)->Arg(1024)->Arg(8192)->Unit(benchmark::kMicrosecond);

void BM_EmbeddingForward(benchmark::State& state) {
  const int64_t rows = state.range(0), d = 768, vocab = 50304;
  Tensor table = random_bf16({vocab, d}, 6, 0.01);
  Tensor ids = random_ids(rows, vocab, 7, DType::i32);
  Tensor out = Tensor::empty({rows, d}, DType::bf16);
  for (auto _ : state) embedding_forward(table, ids, out);
  set_bytes(state, rows * d * 2 * 2);
}
BENCHMARK(BM_EmbeddingForward)->Arg(1024)->Arg(8192)->Unit(benchmark::kMicrosecond);

void BM_EmbeddingBackward(benchmark::State& state) {
  const int64_t rows = state.range(0), d = 768, vocab = 50304;
  Tensor dtable = Tensor::zeros({vocab, d}, DType::bf16);
  Tensor ids = random_ids(rows, vocab, 8, DType::i32);
  Tensor dout = random_bf16({rows, d}, 9);
  for (auto _ : state) embedding_backward(dout, ids, dtable);
  set_bytes(state, rows * d * 2 * 3);
}
BENCHMARK(BM_EmbeddingBackward)->Arg(1024)->Arg(8192)->Unit(benchmark::kMicrosecond);

void BM_Smear(benchmark::State& state) {
  const int64_t rows = state.range(0), d = 768;
  Tensor e = random_bf16({rows, d}, 10), w = random_bf16({1, 12}, 11, 0.1);
  Tensor out = Tensor::empty({rows, d}, DType::bf16), sig = Tensor::empty({rows}, DType::f32);
  Tensor lambda = f32_scalar(1.0f);
  for (auto _ : state) smear_forward(e, w, lambda, out, sig);
  set_bytes(state, rows * d * 2 * 2);
}
BENCHMARK(BM_Smear)->Arg(1024)->Arg(8192)->Unit(benchmark::kMicrosecond);

void BM_Gelu(benchmark::State& state) {
  const int64_t rows = state.range(0), n = 64;
  Tensor x = random_bf16({rows, n}, 12), y = Tensor::empty({rows, n}, DType::bf16);
  for (auto _ : state) gelu_forward(x, y);
  set_bytes(state, rows * n * 2 * 2);
}
BENCHMARK(BM_Gelu)->Arg(1024)->Arg(16384)->Unit(benchmark::kMicrosecond);

void BM_ReluSquare(benchmark::State& state) {
  const int64_t rows = state.range(0), n = 3072;
  Tensor pre = random_bf16({rows, n}, 13), post = Tensor::empty({rows, n}, DType::bf16);
  for (auto _ : state) relu_square_forward(pre, post);
  set_bytes(state, rows * n * 2 * 2);
}
BENCHMARK(BM_ReluSquare)->Arg(256)->Arg(2048)->Unit(benchmark::kMicrosecond);

// Training loss on [T, V] bf16 logits (3 MTP weights + prefix): ~V·T exp/tanh evaluations; FLOP/s counts 10 per logit.
void BM_SoftcapTrainLoss(benchmark::State& state) {
  const int64_t rows = state.range(0), vocab = 50304;
  Tensor z = random_bf16({rows, vocab}, 14, 3.0);
  Tensor targets = random_ids(rows, vocab, 15, DType::i64);
  Tensor loss = Tensor::empty({1}, DType::f32), dz = Tensor::empty({rows, vocab}, DType::bf16);
  const TrainLossConfig config{.mtp_weights = {1.0f, 0.5f, 0.25f}, .loss_scale = 1.0f};
  for (auto _ : state) softcap_train_loss(z, targets, Tensor(), config, loss, dz);
  state.counters["FLOP/s"] =
      benchmark::Counter(static_cast<double>(rows * vocab * 10) * state.iterations(), benchmark::Counter::kIsRate);
  set_bytes(state, rows * vocab * 2 * 2);
}
BENCHMARK(BM_SoftcapTrainLoss)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond);

void BM_QuantizeE4m3(benchmark::State& state) {
  const int64_t rows = state.range(0), d = 768;
  Tensor x = random_bf16({rows, d}, 16), q = Tensor::empty({rows, d}, DType::e4m3);
  Tensor scale = f32_scalar(4.0f / 448);
  for (auto _ : state) quantize_fp8(x, scale, q);
  set_bytes(state, rows * d * 3);
}
BENCHMARK(BM_QuantizeE4m3)->Arg(1024)->Arg(8192)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpt

BENCHMARK_MAIN();
