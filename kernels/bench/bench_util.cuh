#pragma once
// Helpers for the CUDA Google Benchmark programs: random device data (never zeros: METHOD.md), CUDA-event timing
// of one call per benchmark iteration, and FLOP-rate counters.
#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <chrono>
#include <cstdint>
#include <functional>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/tensor.h"

namespace gpt::bench {

__device__ __forceinline__ float hash_uniform(uint64_t i, uint64_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<float>(x >> 40) * (2.0f / 16777216.0f) - 1.0f;  // uniform in [-1, 1)
}

template <typename T>
__global__ void fill_uniform_kernel(T* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = hash_uniform(static_cast<uint64_t>(i), seed) * scale;
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      p[i] = __float2bfloat16_rn(v);
    } else if constexpr (std::is_same_v<T, float>) {
      p[i] = v;
    } else {
      p[i] = T(v);  // __nv_fp8_e4m3 / __nv_fp8_e5m2: saturating round-to-nearest
    }
  }
}

// Fills a CUDA tensor (bf16, f32, e4m3 or e5m2) with uniform values in [-scale, scale).
inline void fill_uniform(Tensor& t, uint64_t seed, float scale = 1.0f) {
  const int64_t n = t.numel();
  const unsigned blocks = 1024, threads = 256;
  switch (t.dtype()) {
    case DType::bf16:
      fill_uniform_kernel<<<blocks, threads>>>(static_cast<__nv_bfloat16*>(t.raw()), n, seed, scale);
      break;
    case DType::f32:
      fill_uniform_kernel<<<blocks, threads>>>(static_cast<float*>(t.raw()), n, seed, scale);
      break;
    case DType::e4m3:
      fill_uniform_kernel<<<blocks, threads>>>(static_cast<__nv_fp8_e4m3*>(t.raw()), n, seed, scale);
      break;
    case DType::e5m2:
      fill_uniform_kernel<<<blocks, threads>>>(static_cast<__nv_fp8_e5m2*>(t.raw()), n, seed, scale);
      break;
    default:
      GPT_FAIL("fill_uniform: unsupported dtype ", dtype_name(t.dtype()));
  }
  GPT_CUDA_CHECK_LAUNCH();
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
}

// Times `call` once per benchmark iteration with CUDA events on the current stream and sets the manual time.
// Warm-up: at least `warmup` untimed calls and at least 0.2 s of them, so that the first benchmark of a process does
// not time an idle GPU ramping its clocks (the 2026-12-02 run measured the 8192³ GEMM at 660 TFLOP/s as the first
// benchmark and ≈770 inside attention_bench after warm-up). Returns the timed seconds and calls.
struct TimedCalls {
  double seconds = 0;
  int64_t calls = 0;
};
inline TimedCalls time_calls_with_events(benchmark::State& state, const std::function<void()>& call, int warmup) {
  const auto warm_start = std::chrono::steady_clock::now();
  for (int i = 0; i < warmup || std::chrono::steady_clock::now() - warm_start < std::chrono::milliseconds(200); ++i) {
    call();
    if (i >= warmup) GPT_CUDA_CHECK(cudaStreamSynchronize(cuda::current_stream()));  // time, not queue depth
  }
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  cuda::Event start(true), stop(true);
  TimedCalls timed;
  for (auto _ : state) {
    start.record(cuda::current_stream());
    call();
    stop.record(cuda::current_stream());
    stop.synchronize();
    const double s = cuda::Event::elapsed_ms(start, stop) / 1e3;
    state.SetIterationTime(s);
    timed.seconds += s;
    ++timed.calls;
  }
  GPT_CUDA_CHECK(cudaGetLastError());
  return timed;
}

// Compute-bound ops: a TFLOP/s counter from `flops` per call.
inline void time_with_events(benchmark::State& state, const std::function<void()>& call, double flops, int warmup = 3) {
  const TimedCalls t = time_calls_with_events(state, call, warmup);
  state.counters["TFLOP/s"] = t.seconds > 0 ? flops * static_cast<double>(t.calls) / t.seconds / 1e12 : 0.0;
  state.counters["GFLOP_per_call"] = flops / 1e9;
}

// Memory-bound ops: `bytes` = the minimal traffic of one call; GB/s to read against the device's copy rate.
inline void time_bytes_with_events(benchmark::State& state, const std::function<void()>& call, double bytes,
                                   int warmup = 3) {
  const TimedCalls t = time_calls_with_events(state, call, warmup);
  state.counters["MB"] = bytes / 1e6;
  state.counters["GB/s"] = t.seconds > 0 ? bytes * static_cast<double>(t.calls) / t.seconds / 1e9 : 0.0;
}

}  // namespace gpt::bench
