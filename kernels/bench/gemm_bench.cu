// cuBLASLt GEMM rates at the docs/ANCHORS.md shapes (bf16 and FP8 e4m3 in, bf16 out, fp32 accumulation), through
// gpt::gemm / gpt::gemm_fp8 with the x·Wᵀ layout (A [M, K], B [N, K]) the model uses. The first (warm-up) call of
// each shape autotunes among cuBLASLt's heuristic candidates (kernels/cuda/gemm.cpp); the label names the choice.
//   ./gemm_bench --benchmark_format=json   (compare the TFLOP/s counter with docs/ANCHORS.md)
#include <benchmark/benchmark.h>

#include "kernels/bench/bench_util.cuh"
#include "kernels/cuda/gemm_selection.h"
#include "kernels/gemm.h"

namespace gpt {
namespace {

void BM_GemmBf16(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Tensor a = Tensor::empty({m, k}, DType::bf16, Device::cuda);
  Tensor b = Tensor::empty({n, k}, DType::bf16, Device::cuda);
  Tensor c = Tensor::empty({m, n}, DType::bf16, Device::cuda);
  bench::fill_uniform(a, 1);
  bench::fill_uniform(b, 2);
  bench::time_with_events(
      state, [&] { gemm(a, b, c, {.trans_b = true}); }, 2.0 * m * n * k);
  state.SetLabel(cuda::gemm_selection());
}

void BM_GemmFp8E4m3(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Tensor a = Tensor::empty({m, k}, DType::e4m3, Device::cuda);
  Tensor b = Tensor::empty({n, k}, DType::e4m3, Device::cuda);
  Tensor c = Tensor::empty({m, n}, DType::bf16, Device::cuda);
  Tensor scales = Tensor::empty({4}, DType::f32, Device::cuda);  // own allocation: 16-byte aligned
  bench::fill_uniform(a, 3, 240.0f);
  bench::fill_uniform(b, 4, 240.0f);
  bench::fill_uniform(scales, 5, 1e-2f);
  const Tensor sa = scales.slice(0, 1), sb = scales.slice(0, 1);
  bench::time_with_events(
      state, [&] { gemm_fp8(a, b, c, sa, sb); }, 2.0 * m * n * k);
  state.SetLabel(cuda::gemm_selection());
}

void anchor_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K"});
  b->Args({8192, 8192, 8192});
  b->Args({768, 65536, 768});
  b->Args({3072, 65536, 768});
  b->Args({768, 65536, 3072});
  b->Args({50304, 65536, 768});
  b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
}

BENCHMARK(BM_GemmBf16)->Apply(anchor_shapes);
BENCHMARK(BM_GemmFp8E4m3)->Apply(anchor_shapes);

}  // namespace
}  // namespace gpt

BENCHMARK_MAIN();
