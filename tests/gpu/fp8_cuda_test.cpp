// CUDA FP8 quantize / dequantize / amax / scale_from_amax (bit-exact against the CPU encoders, special values too)
// and fp8_gemm against the CPU's emulated FP8 GEMM.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/cuda/fp8_variants.h"
#include "kernels/fp8.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using testing::random_tensor;

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor h = t.to(Device::cpu);
  const auto* p = static_cast<const uint8_t*>(h.raw());
  return {p, p + h.numel()};
}

class Fp8Cuda : public ::testing::TestWithParam<DType> {};

TEST_P(Fp8Cuda, QuantizeIsBitExactIncludingSpecials) {
  GPT_REQUIRE_CUDA_DEVICE();
  const DType format = GetParam();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values = {0.0f,     -0.0f,       inf,         -inf,         nan,         1e-30f,
                               -1e-30f,  448.0f,      449.0f,      465.0f,       1e6f,        57344.0f,
                               61440.0f, 2.0f / 1024, 3.0f / 2048, 1.0f / 65536, 1.5f / 65536};
  const Tensor rnd = random_tensor({4096}, DType::f32, 101, 300.0);
  for (float v : rnd.to_floats()) values.push_back(v);
  const Tensor x = Tensor::from_floats(values, {static_cast<int64_t>(values.size())}, DType::f32);
  const Tensor scale = scalar_tensor(0.75, DType::f32);
  Tensor q_cpu = Tensor::empty(x.shape(), format), q_gpu = Tensor::empty(x.shape(), format, Device::cuda);
  quantize_fp8(x, scale, q_cpu);
  quantize_fp8(gpu(x), gpu(scale), q_gpu);
  EXPECT_EQ(bytes_of(q_gpu), bytes_of(q_cpu));

  for (DType out_dtype : {DType::f32, DType::bf16}) {
    Tensor x_cpu = Tensor::empty(x.shape(), out_dtype), x_gpu = Tensor::empty(x.shape(), out_dtype, Device::cuda);
    dequantize_fp8(q_cpu, scale, x_cpu);
    dequantize_fp8(q_gpu, gpu(scale), x_gpu);
    const auto a = x_gpu.to_doubles(), b = x_cpu.to_doubles();
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(b[i])) {
        EXPECT_TRUE(std::isnan(a[i])) << i;
      } else {
        EXPECT_EQ(a[i], b[i]) << i;
      }
    }
  }
}

// The same specials through the 16-byte pack path (a length that is a multiple of every pack width).
TEST_P(Fp8Cuda, QuantizePackedPathIsBitExactIncludingSpecials) {
  GPT_REQUIRE_CUDA_DEVICE();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values = {0.0f,   -0.0f,  inf,  -inf,     nan,      1e-30f,      -1e-30f,     448.0f,
                               449.0f, 465.0f, 1e6f, 57344.0f, 61440.0f, 2.0f / 1024, 3.0f / 2048, 1.0f / 65536};
  for (float v : random_tensor({4080}, DType::f32, 104, 300.0).to_floats()) values.push_back(v);
  ASSERT_EQ(values.size() % 16, 0u);
  for (DType in_dtype : {DType::f32, DType::bf16}) {
    const Tensor x = Tensor::from_floats(values, {static_cast<int64_t>(values.size())}, in_dtype);
    const Tensor scale = scalar_tensor(0.75, DType::f32);
    Tensor q_cpu = Tensor::empty(x.shape(), GetParam()), q_gpu = Tensor::empty(x.shape(), GetParam(), Device::cuda);
    quantize_fp8(x, scale, q_cpu);
    quantize_fp8(gpu(x), gpu(scale), q_gpu);
    EXPECT_EQ(bytes_of(q_gpu), bytes_of(q_cpu)) << dtype_name(in_dtype);
  }
}

// The fused §7.2 activation equals relu_square_forward, quantize_fp8 and amax on the CPU, bit for bit, in every
// kernel version (kernels/cuda/fp8_variants.h); the scale makes the largest values saturate. 64 × 3072 takes the
// pack path, 7 × 143 the scalar one; 1537 × 3072 has more packs than two of v2's waves, so its threads take both
// the two-pack loop and the one-pack tail.
TEST_P(Fp8Cuda, ReluSquareQuantizeMatchesTheThreeOps) {
  GPT_REQUIRE_CUDA_DEVICE();
  using Version = void (*)(const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&);
  const std::pair<const char*, Version> versions[] = {{"v1", cuda::relu_square_quantize_fp8_v1},
                                                      {"v2", cuda::relu_square_quantize_fp8_v2}};
  for (const Shape& shape : {Shape{64, 3072}, Shape{7, 143}, Shape{1537, 3072}}) {
    for (DType dtype : {DType::bf16, DType::f32}) {
      const Tensor pre = random_tensor(shape, dtype, 105, 30.0);
      const Tensor scale = scalar_tensor(0.9, DType::f32);
      Tensor post_cpu = Tensor::empty(shape, dtype), q_cpu = Tensor::empty(shape, GetParam());
      Tensor max_cpu = Tensor::empty({1}, DType::f32);
      relu_square_quantize_fp8(pre, scale, post_cpu, q_cpu, max_cpu);
      for (const auto& [name, run] : versions) {
        Tensor post_gpu = Tensor::empty(shape, dtype, Device::cuda);
        Tensor q_gpu = Tensor::empty(shape, GetParam(), Device::cuda);
        Tensor max_gpu = Tensor::empty({1}, DType::f32, Device::cuda);
        run(gpu(pre), gpu(scale), post_gpu, q_gpu, max_gpu);
        const std::string what = shape_string(shape) + " " + dtype_name(dtype) + " " + name;
        EXPECT_EQ(post_gpu.to_doubles(), post_cpu.to_doubles()) << what;
        EXPECT_EQ(bytes_of(q_gpu), bytes_of(q_cpu)) << what;
        EXPECT_EQ(max_gpu.to_floats()[0], max_cpu.to_floats()[0]) << what;
      }
      EXPECT_GT(max_cpu.to_floats()[0], 448.0f * 0.9f) << "the case should saturate some values";
    }
  }
}

TEST_P(Fp8Cuda, QuantizeBf16RecipeShape) {
  GPT_REQUIRE_CUDA_DEVICE();
  const Tensor x = random_tensor({2048, 768}, DType::bf16, 102, 50.0);
  const Tensor scale = scalar_tensor(100.0 / 448.0, DType::f32);
  Tensor q_cpu = Tensor::empty(x.shape(), GetParam()), q_gpu = Tensor::empty(x.shape(), GetParam(), Device::cuda);
  quantize_fp8(x, scale, q_cpu);
  quantize_fp8(gpu(x), gpu(scale), q_gpu);
  EXPECT_EQ(bytes_of(q_gpu), bytes_of(q_cpu));
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Cuda, ::testing::Values(DType::e4m3, DType::e5m2));

// Every version of the byte transpose fp8_gemm applies to an operand (kernels/cuda/fp8_variants.h) against a host
// transpose: whole 128-byte tiles, partial tiles in both directions, and a shape v2 leaves to v1 (not multiples
// of 16).
TEST(Fp8Cuda, ByteTransposeVersionsMatchTheHost) {
  GPT_REQUIRE_CUDA_DEVICE();
  for (const Shape& shape : {Shape{128, 256}, Shape{1040, 784}, Shape{48, 80}, Shape{12, 20}, Shape{512, 50304}}) {
    const int64_t rows = shape[0], cols = shape[1];
    Tensor q = Tensor::empty(shape, DType::e4m3);
    auto* bytes = static_cast<uint8_t*>(const_cast<void*>(q.raw()));
    for (int64_t i = 0; i < q.numel(); ++i) bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
    std::vector<uint8_t> want(static_cast<size_t>(q.numel()));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) want[c * rows + r] = bytes[r * cols + c];
    }
    const Tensor q_gpu = gpu(q);
    for (int version = 1; version <= 2; ++version) {
      const Tensor t = cuda::transpose_fp8_bytes(q_gpu, version);
      EXPECT_EQ(t.shape(), (Shape{cols, rows}));
      EXPECT_EQ(bytes_of(t), want) << shape_string(shape) << " v" << version;
    }
  }
}

TEST(Fp8Cuda, AmaxAndScaleFromAmax) {
  GPT_REQUIRE_CUDA_DEVICE();
  for (DType dtype : {DType::f64, DType::f32, DType::bf16}) {
    const Tensor x = random_tensor({3001, 17}, dtype, 103, 7.0);
    Tensor m_cpu = Tensor::empty({1}, DType::f32), m_gpu = Tensor::empty({1}, DType::f32, Device::cuda);
    poison(m_gpu);
    amax(x, m_cpu);
    amax(gpu(x), m_gpu);
    EXPECT_EQ(m_gpu.to_doubles(), m_cpu.to_doubles()) << dtype_name(dtype);
    Tensor s_cpu = Tensor::empty({1}, DType::f32), s_gpu = Tensor::empty({1}, DType::f32, Device::cuda);
    scale_from_amax(m_cpu, 1.8f / 448.0f, 1e-12f, s_cpu);
    scale_from_amax(m_gpu, 1.8f / 448.0f, 1e-12f, s_gpu);
    EXPECT_EQ(s_gpu.to_doubles(), s_cpu.to_doubles());
  }
  // NaN propagates; an all-zero tensor gives 0 and the floor applies.
  std::vector<float> with_nan(1000, 1.0f);
  with_nan[517] = std::numeric_limits<float>::quiet_NaN();
  Tensor m = Tensor::empty({1}, DType::f32, Device::cuda);
  amax(Tensor::from_floats(with_nan, {1000}, DType::f32, Device::cuda), m);
  EXPECT_TRUE(std::isnan(m.to_floats()[0]));
  amax(Tensor::zeros({1000}, DType::f32, Device::cuda), m);
  EXPECT_EQ(m.to_floats()[0], 0.0f);
  Tensor s = Tensor::empty({1}, DType::f32, Device::cuda);
  scale_from_amax(m, 2.0f, 1e-12f, s);
  EXPECT_EQ(s.to_floats()[0], 2e-12f);
}

// amax and amax_scale finish in the reduction's last block, which leaves the per-device scratch at zero: a call after
// a larger max must not see it, at every grid size (one block; 2,048 blocks of packs; the scalar path) and for an
// empty x. The scale equals the CPU's amax then scale_from_amax bit for bit.
TEST(Fp8Cuda, AmaxScaleMatchesTheCpuCallAfterCall) {
  GPT_REQUIRE_CUDA_DEVICE();
  const std::pair<Shape, double> cases[] = {{{3001, 17}, 1e6},   {{4096, 768}, 5.0}, {{7}, 1e3},
                                            {{4096, 768}, 0.01}, {{0}, 1.0},         {{33, 64}, 2.0}};
  for (const auto& [shape, bound] : cases) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      const Tensor x = random_tensor(shape, dtype, 107, bound);
      Tensor s_cpu = Tensor::empty({1}, DType::f32), s_gpu = Tensor::empty({1}, DType::f32, Device::cuda);
      Tensor m_cpu = Tensor::empty({1}, DType::f32), m_gpu = Tensor::empty({1}, DType::f32, Device::cuda);
      poison(s_gpu);
      poison(m_gpu);
      amax_scale(x, 1.0f / 448.0f, 1e-12f, s_cpu);
      amax_scale(gpu(x), 1.0f / 448.0f, 1e-12f, s_gpu);
      amax(x, m_cpu);
      amax(gpu(x), m_gpu);
      const std::string what = shape_string(shape) + " " + dtype_name(dtype) + " bound " + std::to_string(bound);
      EXPECT_EQ(s_gpu.to_doubles(), s_cpu.to_doubles()) << what;
      EXPECT_EQ(m_gpu.to_doubles(), m_cpu.to_doubles()) << what;
    }
  }
  // NaN wins and is NaN in the scale; the call after it is clean again.
  std::vector<float> with_nan(5000, 1.0f);
  with_nan[4099] = std::numeric_limits<float>::quiet_NaN();
  Tensor s = Tensor::empty({1}, DType::f32, Device::cuda);
  amax_scale(Tensor::from_floats(with_nan, {5000}, DType::f32, Device::cuda), 2.0f, 1e-12f, s);
  EXPECT_TRUE(std::isnan(s.to_floats()[0]));
  amax_scale(Tensor::from_floats(std::vector<float>(5000, -0.5f), {5000}, DType::f32, Device::cuda), 2.0f, 1e-12f, s);
  EXPECT_EQ(s.to_floats()[0], 1.0f);
}

// The fused activation's max, like amax's, starts from zero at every call: a large max, then a small one.
TEST(Fp8Cuda, ReluSquareQuantizeMaxIsThisCallsMax) {
  GPT_REQUIRE_CUDA_DEVICE();
  const Tensor scale = scalar_tensor(1.0, DType::f32);
  for (double bound : {20.0, 0.5, 3.0}) {
    const Tensor pre = random_tensor({1537, 3072}, DType::bf16, 108, bound);
    Tensor post = Tensor::empty(pre.shape(), DType::bf16), q = Tensor::empty(pre.shape(), DType::e4m3);
    Tensor max_cpu = Tensor::empty({1}, DType::f32);
    relu_square_quantize_fp8(pre, scale, post, q, max_cpu);
    Tensor post_gpu = Tensor::empty(pre.shape(), DType::bf16, Device::cuda);
    Tensor q_gpu = Tensor::empty(pre.shape(), DType::e4m3, Device::cuda);
    Tensor max_gpu = Tensor::empty({1}, DType::f32, Device::cuda);
    relu_square_quantize_fp8(gpu(pre), gpu(scale), post_gpu, q_gpu, max_gpu);
    EXPECT_EQ(max_gpu.to_floats()[0], max_cpu.to_floats()[0]) << "bound " << bound;
  }
}

struct GemmCase {
  DType c_dtype;
  bool trans_a, trans_b;
  float beta;
  int64_t m = 96, n = 160, k = 128;  // multiples of 16: cuBLASLt's FP8 kernels; otherwise the widened fallback
  DType b_dtype = DType::e4m3;
  Fp8Accumulation accumulation = Fp8Accumulation::full;
};

// Tolerances against the exact fp32 product of the same fp8 values: bf16 C carries one bf16 rounding (2^-9
// relative). The FP8 tensor cores add their products with fewer mantissa bits than fp32 even in full mode, which
// only promotes partial sums to fp32 between k-blocks: measured on the H200 (2026-12-03) 1.0e-4–1.3e-4 relative
// at K = 128–144 in full mode and 4.4e-4 at K = 768 in fast mode (f32 C). The test prints the measured errors.
double tolerance(const GemmCase& g) {
  const bool tensor_cores = g.m % 16 == 0 && g.n % 16 == 0 && g.k % 16 == 0;
  double tol = !tensor_cores ? 1e-5 : g.accumulation == Fp8Accumulation::fast ? 5e-3 : 5e-4;
  if (g.c_dtype == DType::bf16) tol = std::max(tol, 5e-3);
  return tol;
}

class Fp8GemmCuda : public ::testing::TestWithParam<GemmCase> {};

TEST_P(Fp8GemmCuda, MatchesEmulatedCpuGemm) {
  GPT_REQUIRE_CUDA_DEVICE();
  const GemmCase g = GetParam();
  const auto [m, n, k] = std::tuple{g.m, g.n, g.k};
  const Tensor a = random_tensor(g.trans_a ? Shape{k, m} : Shape{m, k}, DType::f32, 111, 40.0);
  const Tensor b = random_tensor(g.trans_b ? Shape{n, k} : Shape{k, n}, DType::f32, 112, 40.0);
  const Tensor sa = scalar_tensor(0.5, DType::f32), sb = scalar_tensor(0.25, DType::f32);
  Tensor a8 = Tensor::empty(a.shape(), DType::e4m3), b8 = Tensor::empty(b.shape(), g.b_dtype);
  quantize_fp8(a, sa, a8);
  quantize_fp8(b, sb, b8);
  const GemmArgs args{.trans_a = g.trans_a, .trans_b = g.trans_b, .alpha = 1.5f, .beta = g.beta};
  Tensor c_cpu = random_tensor({m, n}, g.c_dtype, 113), c_gpu = gpu(c_cpu);
  fp8_gemm(a8, b8, sa, sb, c_cpu, args);
  fp8_gemm(gpu(a8), gpu(b8), gpu(sa), gpu(sb), c_gpu, args, g.accumulation);
  const double err = rel_error(c_gpu, c_cpu);
  RecordProperty("relative_error", std::to_string(err));
  std::printf("fp8_gemm %lldx%lldx%lld trans %d%d beta %.1f %s C %s: relative error %.3g (tolerance %.1g)\n",
              static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), g.trans_a, g.trans_b,
              g.beta, g.accumulation == Fp8Accumulation::fast ? "fast" : "full", dtype_name(g.c_dtype), err,
              tolerance(g));
  EXPECT_LT(err, tolerance(g));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Fp8GemmCuda,
    ::testing::Values(GemmCase{DType::f32, false, false, 0.0f}, GemmCase{DType::bf16, false, true, 0.0f},
                      GemmCase{DType::f32, true, false, 1.0f}, GemmCase{DType::bf16, true, true, 0.5f},
                      // Tile edges of the byte transpose (rows/cols off 64) and the lm_head backward's e5m2 B.
                      GemmCase{DType::f32, true, false, 1.0f, 80, 208, 144, DType::e5m2},
                      GemmCase{DType::bf16, false, true, 1.0f, 112, 48, 784, DType::e5m2},
                      // Fast accumulation (§7.1/§7.2 forward products).
                      GemmCase{DType::bf16, false, false, 0.0f, 96, 160, 768, DType::e4m3, Fp8Accumulation::fast},
                      GemmCase{DType::f32, false, true, 0.0f, 96, 160, 768, DType::e4m3, Fp8Accumulation::fast},
                      // Not multiples of 16: the widened bf16 fallback, exact up to fp32 summation order.
                      GemmCase{DType::f32, false, false, 1.0f, 90, 150, 100},
                      GemmCase{DType::bf16, true, true, 0.0f, 33, 17, 40, DType::e5m2}));

}  // namespace
}  // namespace gpt
