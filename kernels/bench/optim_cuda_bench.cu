// CUDA optimizer kernels: Adam over the bigram_embed table (RECIPE: 377280×768 bf16 = 289,751,040 elements;
// the whole table and one rank's 1/8 shard) and the NorMuon elementwise/per-matrix steps on 768×768 and
// 3072×768 stacks. Times are CUDA events around each launch (manual time); bytes/s counts every tensor
// read once and every output written once (the floor of a memory-bound kernel).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/adam.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/normuon.h"

namespace gpt {
namespace {

// Fills a device tensor with hashed uniform values in [−scale, scale] (|·| when absolute): random data,
// not zeros, without a host round trip for 290M elements.
__device__ uint32_t mix_bits(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

template <typename T>
__global__ void fill_kernel(T* out, int64_t n, uint64_t seed, float scale, bool absolute) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float v =
        (static_cast<float>(mix_bits(seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(i))) * 2.3283064e-10f * 2.0f -
         1.0f) *
        scale;
    if (absolute) v = fabsf(v);
    if constexpr (std::is_same_v<T, uint16_t>) {
      out[i] = static_cast<uint16_t>(mix_bits(seed + static_cast<uint64_t>(i)));
    } else {
      out[i] = static_cast<T>(v);
    }
  }
}

Tensor random_device(Shape shape, DType dtype, uint64_t seed, float scale, bool absolute = false) {
  Tensor t = Tensor::empty(std::move(shape), dtype, Device::cuda);
  const int64_t n = t.numel();
  switch (dtype) {
    case DType::f32:
      fill_kernel<<<1024, 256>>>(static_cast<float*>(t.raw()), n, seed, scale, absolute);
      break;
    case DType::bf16:
      fill_kernel<<<1024, 256>>>(static_cast<__nv_bfloat16*>(t.raw()), n, seed, scale, absolute);
      break;
    case DType::u16:
      fill_kernel<<<1024, 256>>>(static_cast<uint16_t*>(t.raw()), n, seed, scale, absolute);
      break;
    default:
      GPT_FAIL("optim_cuda_bench: no fill for ", dtype_name(dtype));
  }
  GPT_CUDA_CHECK_LAUNCH();
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  return t;
}

// Times `body` with CUDA events per iteration (after one warm-up call).
template <typename F>
void time_with_events(benchmark::State& state, F&& body) {
  cudaEvent_t start, stop;
  GPT_CUDA_CHECK(cudaEventCreate(&start));
  GPT_CUDA_CHECK(cudaEventCreate(&stop));
  body();
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  for (auto _ : state) {
    GPT_CUDA_CHECK(cudaEventRecord(start));
    body();
    GPT_CUDA_CHECK(cudaEventRecord(stop));
    GPT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    GPT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(static_cast<double>(ms) * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

constexpr int64_t kBigramRows = 377280, kModelDim = 768;

// Arg 0: 1 = whole table, 8 = one rank's shard at W = 8.
void BM_AdamBigramTable(benchmark::State& state) {
  const int64_t rows = kBigramRows / state.range(0);
  const Shape shape{rows, kModelDim};
  Tensor p = random_device(shape, DType::bf16, 1, 0.5f), g = random_device(shape, DType::bf16, 2, 0.01f);
  Tensor m = random_device(shape, DType::f32, 3, 0.001f), v = random_device(shape, DType::f32, 4, 1e-5f, true);
  AdamArgs args{.lr = 0.001, .beta1 = 0.75, .beta2 = 0.95, .eps = 1e-10, .weight_decay = 5.0, .step = 1};
  time_with_events(state, [&] {
    adam_update(p, g, m, v, args);
    ++args.step;
  });
  // Read p, g, m, v; write p, m, v.
  const double bytes = static_cast<double>(rows * kModelDim) * (2 + 2 + 4 + 4 + 2 + 4 + 4);
  state.counters["bytes_per_second"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["elements"] = static_cast<double>(rows * kModelDim);
}
BENCHMARK(BM_AdamBigramTable)->Arg(1)->Arg(8)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Args: count, rows (cols = 768).
struct Stack {
  Tensor param, grad, x, momentum, second_moment, mantissa;
  Stack(int64_t count, int64_t rows) {
    const Shape shape{count, rows, kModelDim};
    param = random_device(shape, DType::bf16, 5, 0.05f);
    grad = random_device(shape, DType::bf16, 6, 0.01f);
    x = random_device(shape, DType::bf16, 7, 0.02f);
    momentum = random_device(shape, DType::f32, 8, 0.01f);
    second_moment = random_device({count, rows >= kModelDim ? rows : kModelDim}, DType::f32, 9, 1e-4f, true);
    mantissa = random_device(shape, DType::u16, 10, 0.0f);
  }
  double elements() const { return static_cast<double>(param.numel()); }
};

void BM_NorMuonMomentum(benchmark::State& state) {
  Stack s(state.range(0), state.range(1));
  time_with_events(state, [&] { normuon_momentum(s.grad, s.momentum, s.x, 0.95); });
  state.counters["bytes_per_second"] =  // g, m read; m, x written
      benchmark::Counter(s.elements() * (2 + 4 + 4 + 2), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_NorMuonNormalize(benchmark::State& state) {
  Stack s(state.range(0), state.range(1));
  time_with_events(state, [&] { normuon_normalize(s.x); });
  state.counters["bytes_per_second"] =  // x read twice (norm, scale), written once
      benchmark::Counter(s.elements() * (2 + 2 + 2), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_NorMuonApply(benchmark::State& state) {
  Stack s(state.range(0), state.range(1));
  const NorMuonArgs args{.lr = 0.03, .odd_matrix_lr_mul = 2.0};
  time_with_events(state, [&] { normuon_apply(s.x, s.second_moment, s.param, s.mantissa, args); });
  state.counters["bytes_per_second"] =  // x read twice (statistics, update); param and mantissa read + written
      benchmark::Counter(s.elements() * (2 + 2 + 4 + 4), benchmark::Counter::kIsIterationInvariantRate);
}

#define NORMUON_SHAPES ->Args({12, 768})->Args({24, 768})->Args({6, 3072})->Args({12, 3072})
BENCHMARK(BM_NorMuonMomentum) NORMUON_SHAPES->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NorMuonNormalize) NORMUON_SHAPES->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NorMuonApply) NORMUON_SHAPES->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpt

BENCHMARK_MAIN();
