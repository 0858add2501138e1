// CUDA FP8 quantize / dequantize / amax / scale_from_amax (bit-exact against the CPU encoders, special values too)
// and fp8_gemm against the CPU's emulated FP8 GEMM.
#include <gtest/gtest.h>

#include <limits>

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
  std::vector<float> values = {0.0f, -0.0f, inf, -inf, nan, 1e-30f, -1e-30f, 448.0f, 449.0f, 465.0f, 1e6f,
                               57344.0f, 61440.0f, 2.0f / 1024, 3.0f / 2048, 1.0f / 65536, 1.5f / 65536};
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

struct GemmCase {
  DType c_dtype;
  bool trans_a, trans_b;
  float beta;
};

class Fp8GemmCuda : public ::testing::TestWithParam<GemmCase> {};

TEST_P(Fp8GemmCuda, MatchesEmulatedCpuGemm) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [c_dtype, ta, tb, beta] = GetParam();
  const int64_t m = 96, n = 160, k = 128;
  const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, DType::f32, 111, 40.0);
  const Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, DType::f32, 112, 40.0);
  const Tensor sa = scalar_tensor(0.5, DType::f32), sb = scalar_tensor(0.25, DType::f32);
  Tensor a8 = Tensor::empty(a.shape(), DType::e4m3), b8 = Tensor::empty(b.shape(), DType::e4m3);
  quantize_fp8(a, sa, a8);
  quantize_fp8(b, sb, b8);
  const GemmArgs args{.trans_a = ta, .trans_b = tb, .alpha = 1.5f, .beta = beta};
  Tensor c_cpu = random_tensor({m, n}, c_dtype, 113), c_gpu = gpu(c_cpu);
  fp8_gemm(a8, b8, sa, sb, c_cpu, args);
  fp8_gemm(gpu(a8), gpu(b8), gpu(sa), gpu(sb), c_gpu, args);
  EXPECT_LT(rel_error(c_gpu, c_cpu), c_dtype == DType::bf16 ? 5e-3 : 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Fp8GemmCuda,
                         ::testing::Values(GemmCase{DType::f32, false, false, 0.0f},
                                           GemmCase{DType::bf16, false, true, 0.0f},
                                           GemmCase{DType::f32, true, false, 1.0f},
                                           GemmCase{DType::bf16, true, true, 0.5f}));

}  // namespace
}  // namespace gpt
