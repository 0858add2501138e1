// CUDA kernels of four §S op families at the `ext` / `mini-ext` shapes: the sampled softmax's column gather and
// scatter-add of lm_head (RECIPE §S.4, P per stage), the masked validation rows (§S.6), the tail-average ops (§S.5)
// over the 50304×768 table and one rank's 1/8 shard of it, and the ANVIL steps (§S.8) on the bank stacks. Each case
// reports bytes_per_second: every tensor element the op must read counted once and every element it writes once (the
// floor of a memory-bound kernel), so dividing by the GPU's copy rate gives the fraction of it the kernel reaches.
// The column gather reads whole 32-byte sectors of which the candidate columns use a part: its counter counts only
// the useful bytes.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/anvil.h"
#include "kernels/bench/bench_util.cuh"
#include "kernels/column_select.h"
#include "kernels/masked_validation_loss.h"
#include "kernels/tail_average.h"

namespace gpt {
namespace {

using bench::fill_uniform;
using bench::time_with_events;

constexpr int64_t kModelDim = 768, kVocab = 50304;

Tensor device_uniform(const Shape& shape, DType dtype, uint64_t seed, float scale) {
  Tensor t = Tensor::empty(shape, dtype, Device::cuda);
  fill_uniform(t, seed, scale);
  return t;
}

// Times `call` (bench_util's CUDA events; no FLOP count) and sets the bytes counters from `bytes_per_call`.
void time_memory_bound(benchmark::State& state, double bytes_per_call, const std::function<void()>& call) {
  time_with_events(state, call, 0);
  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes_per_call, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes_per_call"] = bytes_per_call;
}

// A candidate set's form: P distinct columns of [0, V), sorted, on the device.
Tensor candidate_columns(int64_t p) {
  std::vector<int64_t> all(static_cast<size_t>(kVocab));
  std::iota(all.begin(), all.end(), 0);
  std::mt19937_64 rng(p);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(p));
  std::sort(all.begin(), all.end());
  Tensor c = Tensor::empty({p}, DType::i64);
  std::copy(all.begin(), all.end(), c.data<int64_t>());
  return c.to(Device::cuda);
}

// ---- §S.4: arg P ----

void BM_ColumnGather(benchmark::State& state) {
  const int64_t p = state.range(0);
  const Tensor table = device_uniform({kModelDim, kVocab}, DType::bf16, 1, 0.1f);
  const Tensor columns = candidate_columns(p);
  Tensor out = Tensor::empty({kModelDim, p}, DType::bf16, Device::cuda);
  // Columns; the useful input and the output.
  time_memory_bound(state, static_cast<double>(kModelDim * p) * (2 + 2) + static_cast<double>(p) * 8,
                    [&] { column_gather(table, columns, out); });
}

void BM_ColumnScatterAdd(benchmark::State& state) {
  const int64_t p = state.range(0);
  Tensor table = device_uniform({kModelDim, kVocab}, DType::bf16, 2, 0.1f);
  const Tensor src = device_uniform({kModelDim, p}, DType::bf16, 3, 1e-3f);
  const Tensor columns = candidate_columns(p);
  // Columns; src read; the destination columns read and written.
  time_memory_bound(state, static_cast<double>(kModelDim * p) * (2 + 2 + 2) + static_cast<double>(p) * 8,
                    [&] { column_scatter_add(src, columns, table); });
}

#define STAGE_SIZES ->Arg(10240)->Arg(14336)->Arg(24576)
BENCHMARK(BM_ColumnGather) STAGE_SIZES->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ColumnScatterAdd) STAGE_SIZES->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---- §S.6: arg rows of one chunk of z_raw [rows, V] ----

void BM_MaskedValidationRows(benchmark::State& state) {
  const int64_t rows = state.range(0), row_bytes = kVocab / 8;
  const Tensor z_raw = device_uniform({rows, kVocab}, DType::bf16, 4, 4.0f);
  Tensor inputs = Tensor::empty({rows}, DType::i32), targets = Tensor::empty({rows}, DType::i64);
  Tensor mask = Tensor::empty({rows, row_bytes}, DType::u8);  // one mask row per position: no row is shared
  std::mt19937_64 rng(5);
  for (int64_t t = 0; t < rows; ++t) {
    inputs.data<int32_t>()[t] = static_cast<int32_t>(t);
    targets.data<int64_t>()[t] = static_cast<int64_t>(rng() % kVocab);
  }
  auto* bits = static_cast<uint8_t*>(mask.raw());
  for (int64_t i = 0; i < rows * row_bytes; ++i) bits[i] = static_cast<uint8_t>(rng() & rng());
  inputs = inputs.to(Device::cuda);
  targets = targets.to(Device::cuda);
  mask = mask.to(Device::cuda);
  Tensor sum = Tensor::zeros({1}, DType::f32, Device::cuda);
  time_memory_bound(state, static_cast<double>(rows) * (kVocab * 2 + row_bytes + 4 + 8),
                    [&] { masked_validation_loss_rows_add(z_raw, inputs, targets, mask, sum); });
}
BENCHMARK(BM_MaskedValidationRows)->Arg(1024)->Arg(4096)->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---- §S.5: arg 1 = the whole 50304×768 table (mini-ext), 8 = one rank's shard at W = 8 (ext) ----

struct TailTensors {
  Tensor w, acc;
  explicit TailTensors(int64_t parts) {
    const Shape shape{kVocab / parts, kModelDim};
    w = device_uniform(shape, DType::bf16, 6, 0.5f);
    acc = device_uniform(shape, DType::f32, 7, 0.5f);
  }
  double elements() const { return static_cast<double>(w.numel()); }
};

void BM_TailAccumulate(benchmark::State& state) {
  TailTensors t(state.range(0));
  // w, acc read; acc written
  time_memory_bound(state, t.elements() * (2 + 4 + 4),
                    [&] { tail_accumulate(t.acc, t.w, 0.07547169811320754, false); });
}

void BM_TailSeedCopy(benchmark::State& state) {
  TailTensors t(state.range(0));
  // w read, acc written
  time_memory_bound(state, t.elements() * (2 + 4), [&] { tail_accumulate(t.acc, t.w, 0.0, true); });
}

void BM_TailShip(benchmark::State& state) {
  TailTensors t(state.range(0));
  // w, acc read; w written
  time_memory_bound(state, t.elements() * (2 + 4 + 2), [&] { tail_ship(t.w, t.acc, 0.65); });
}

void BM_SumOfSquares(benchmark::State& state) {  // includes the wait for the host's result
  TailTensors t(state.range(0));
  double sink = 0;
  benchmark::DoNotOptimize(sink);
  time_memory_bound(state, t.elements() * 2, [&] { sink += sum_of_squares(t.w); });
}

void BM_ScaleInPlace(benchmark::State& state) {
  TailTensors t(state.range(0));
  time_memory_bound(state, t.elements() * (2 + 2), [&] { scale_in_place(t.w, 1.0); });
}

#define TAIL_PARTS ->Arg(1)->Arg(8)
BENCHMARK(BM_TailAccumulate) TAIL_PARTS->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TailSeedCopy) TAIL_PARTS->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TailShip) TAIL_PARTS->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SumOfSquares) TAIL_PARTS->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ScaleInPlace) TAIL_PARTS->UseManualTime()->Unit(benchmark::kMicrosecond);

// ---- §S.8: args count, rows (cols = 768), bf16 params as in training ----

struct AnvilStack {
  Tensor param, grad, x, gram, slow_rail, fast_rail, second_moment, mantissa;
  AnvilStack(int64_t count, int64_t rows) {
    const Shape shape{count, rows, kModelDim};
    const int64_t k = std::min(rows, kModelDim);
    param = device_uniform(shape, DType::bf16, 8, 0.05f);
    grad = device_uniform(shape, DType::bf16, 9, 0.01f);
    x = device_uniform(shape, DType::bf16, 10, 0.02f);
    gram = device_uniform({count, k, k}, DType::bf16, 11, 0.02f);
    fast_rail = device_uniform(shape, DType::f32, 12, 0.01f);
    slow_rail = device_uniform(shape, DType::f32, 13, 0.01f);
    second_moment = Tensor::zeros({count, rows >= kModelDim ? rows : kModelDim}, DType::f32, Device::cuda);
    mantissa = Tensor::zeros(shape, DType::u16, Device::cuda);
  }
  double elements() const { return static_cast<double>(param.numel()); }
};

AnvilArgs bench_args() {
  AnvilArgs a;
  a.step = 600;
  a.total_steps = 1194;
  a.lr = 0.03;
  a.odd_matrix_lr_mul = 2.0;
  return a;
}

void BM_AnvilMomentum(benchmark::State& state) {
  AnvilStack s(state.range(0), state.range(1));
  const AnvilRails rails = anvil_rails(bench_args());
  // G read; both rails read and written; X written.
  time_memory_bound(state, s.elements() * (2 + 4 + 4 + 4 + 4 + 2),
                    [&] { anvil_momentum(s.grad, s.fast_rail, s.slow_rail, s.x, rails); });
}

void BM_AnvilScaleByTrace(benchmark::State& state) {  // the backend piece after the Gram product
  AnvilStack s(state.range(0), state.range(1));
  // X and A read and written.
  time_memory_bound(state, (s.elements() + static_cast<double>(s.gram.numel())) * (2 + 2),
                    [&] { cuda::anvil_scale_by_trace(s.x, s.gram); });
}

void BM_AnvilApply(benchmark::State& state) {
  AnvilStack s(state.range(0), state.range(1));
  const AnvilArgs args = bench_args();
  // X read twice (statistics, update); the slow rail read; param and mantissa read + written.
  time_memory_bound(state, s.elements() * (2 + 2 + 4 + 2 + 2 + 2 + 2),
                    [&] { anvil_apply(s.x, s.second_moment, s.slow_rail, s.param, s.mantissa, args); });
}

#define ANVIL_SHAPES ->Args({12, 768})->Args({24, 768})->Args({6, 3072})->Args({12, 3072})
BENCHMARK(BM_AnvilMomentum) ANVIL_SHAPES->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AnvilScaleByTrace) ANVIL_SHAPES->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AnvilApply) ANVIL_SHAPES->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpt

BENCHMARK_MAIN();
