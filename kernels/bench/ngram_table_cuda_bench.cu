// Google Benchmark cases for the CUDA ops of the hashed n-gram table (RECIPE §S.2) at `mini-ext`'s shapes: the
// embedding forward and backward of one stage-2 microbatch (T = 49,152, d = 768, bf16), the cycle add and the sparse
// Adam of an event over the one-shard table (10,575,360 rows), and a device-to-device copy as the yardstick.
// Each iteration is timed with CUDA events (manual time); the GB/s counter counts the fewest bytes the op must move
// (each input read once, each output written once; a copy of N bytes moves 2N), so each op's rate reads directly
// as a fraction of BM_DeviceCopy's.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/bench/bench_util.cuh"
#include "kernels/bench/zipf_ids.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/ngram_embed.h"
#include "kernels/ngram_update.h"

namespace gpt {
namespace {

constexpr int64_t kTokens = 49152, kDim = 768, kPoolRows = 8192;
constexpr int64_t kTableRows = 10575360;  // mini-ext: one shard of the n-gram table
constexpr double kRowBytes = kDim * 2.0;  // one bf16 row

// Uniform values in [-1, 1) written on the device (the table holds 8·10^9 values: no host copy).
Tensor random_device(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(shape, dtype, Device::cuda);
  bench::fill_uniform(t, seed);
  return t;
}

Tensor device_ids(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t.to(Device::cuda);
}

double distinct(const std::vector<int32_t>& v) {
  return static_cast<double>(std::set<int32_t>(v.begin(), v.end()).size());
}

// One microbatch's 2T row ids (Zipf: frequent n-grams repeat) and sign rows.
struct MicrobatchIds {
  std::vector<int32_t> rows, signs;
};

MicrobatchIds microbatch_ids(int64_t table_rows, uint64_t seed) {
  MicrobatchIds ids{zipf_ids(2 * kTokens, table_rows, seed), std::vector<int32_t>(2 * kTokens)};
  std::mt19937_64 rng(seed + 1);
  std::uniform_int_distribution<int32_t> sign(0, kPoolRows - 1);
  for (int32_t& s : ids.signs) s = sign(rng);
  return ids;
}

// The yardstick: cudaMemcpyAsync of 1 GiB within the device.
void BM_DeviceCopy(benchmark::State& state) {
  const int64_t bytes = int64_t{1} << 30;
  const Tensor src = Tensor::zeros({bytes}, DType::u8, Device::cuda);
  Tensor dst = Tensor::empty({bytes}, DType::u8, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { GPT_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), bytes, cudaMemcpyDeviceToDevice)); },
      2.0 * static_cast<double>(bytes));
}

// Forward over the whole shard. Bytes: ids and sign ids read, each distinct table and sign row read once, Ng written.
void BM_NgramForward(benchmark::State& state) {
  const MicrobatchIds ids = microbatch_ids(kTableRows, 51);
  const Tensor table = random_device({kTableRows, kDim}, DType::bf16, 50);
  const Tensor pool = random_device({kPoolRows, kDim}, DType::bf16, 52);
  const Tensor rows = device_ids(ids.rows), signs = device_ids(ids.signs);
  Tensor out = Tensor::empty({kTokens, kDim}, DType::bf16, Device::cuda);
  const double bytes = 2 * kTokens * 8.0 + (distinct(ids.rows) + distinct(ids.signs)) * kRowBytes + kTokens * kRowBytes;
  state.SetLabel(std::to_string(static_cast<int64_t>(distinct(ids.rows))) + " rows hit");
  bench::time_bytes_with_events(
      state, [&] { ngram_embed_forward(table, pool, rows, signs, out); }, bytes);
}

// Backward into per-row f32 sums indexed by position among the microbatch's distinct rows (as the table calls it),
// the row sort included. Bytes: dNg and both id lists read, each distinct sign row read once, each sum row read and
// written once.
void BM_NgramBackward(benchmark::State& state) {
  MicrobatchIds ids = microbatch_ids(kTableRows, 53);
  std::vector<int32_t> unique = ids.rows;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  for (int32_t& r : ids.rows)
    r = static_cast<int32_t>(std::lower_bound(unique.begin(), unique.end(), r) - unique.begin());
  const auto n_unique = static_cast<int64_t>(unique.size());
  const Tensor dout = random_device({kTokens, kDim}, DType::bf16, 54);
  const Tensor pool = random_device({kPoolRows, kDim}, DType::bf16, 55);
  const Tensor rows = device_ids(ids.rows), signs = device_ids(ids.signs);
  Tensor sums = Tensor::zeros({n_unique, kDim}, DType::f32, Device::cuda);
  const double bytes =
      kTokens * kRowBytes + 2 * kTokens * 8.0 + distinct(ids.signs) * kRowBytes + 2.0 * n_unique * kDim * 4;
  state.SetLabel(std::to_string(n_unique) + " distinct rows");
  bench::time_bytes_with_events(
      state, [&] { ngram_embed_backward(dout, pool, rows, signs, sums); }, bytes);
}

// The fp16 cycle add of one microbatch's sums into a cycle of four microbatches' rows. Bytes: slots and sums read,
// each slot row read and written.
void BM_NgramCycleAdd(benchmark::State& state) {
  const int64_t n = 2 * kTokens / 3, capacity = 4 * n;  // about the distinct rows of one microbatch
  std::vector<int32_t> slots(static_cast<size_t>(capacity));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(56));
  slots.resize(static_cast<size_t>(n));
  const Tensor slots_d = device_ids(slots), sums = random_device({n, kDim}, DType::f32, 57);
  Tensor cycle = Tensor::zeros({capacity, kDim}, DType::f32, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { ngram_cycle_add(cycle, slots_d, sums, true); }, n * 4.0 + 3.0 * n * kDim * 4);
}

// The sparse Adam of one event: the distinct rows of four microbatches over the whole shard (the first call replays
// four owed decays per row, later calls none: the replay is a few fp32 multiplies next to a row's 768 updates).
// Bytes: rows and gradients read, each row's weights, second moment and stamp read and written.
void BM_NgramSparseAdam(benchmark::State& state) {
  std::vector<int32_t> rows = zipf_ids(8 * kTokens, kTableRows, 58);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  std::shuffle(rows.begin(), rows.end(), std::mt19937_64(59));
  const auto n = static_cast<int64_t>(rows.size());
  Tensor table = random_device({kTableRows, kDim}, DType::bf16, 60);
  Tensor moment = Tensor::zeros({kTableRows}, DType::f32, Device::cuda);
  Tensor stamps = Tensor::zeros({kTableRows}, DType::i64, Device::cuda);
  const Tensor grad = random_device({n, kDim}, DType::bf16, 61);
  const Tensor rows_d = device_ids(rows);
  const std::vector<float> betas(64, 0.95f);
  const Tensor history = Tensor::from_floats(betas, {64}, DType::f32, Device::cuda);
  NgramAdamStep step;
  step.event = 5;  // rows untouched so far owe four decays
  step.beta2 = 0.95;
  step.step_scale = 0.5;
  step.decay_scale = 1e-3;
  step.eps = 1e-10;
  const double bytes = n * (4.0 + kRowBytes + 2 * kRowBytes + 2 * (4.0 + 8.0));
  state.SetLabel(std::to_string(n) + " rows");
  bench::time_bytes_with_events(
      state, [&] { ngram_sparse_adam(table, moment, stamps, history, rows_d, grad, step); }, bytes);
}

BENCHMARK(BM_DeviceCopy)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NgramForward)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NgramBackward)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NgramCycleAdd)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NgramSparseAdam)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpt

BENCHMARK_MAIN();
