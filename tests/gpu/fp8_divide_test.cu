// divide_by_scale (kernels/cuda/fp8_convert.cuh), the division every FP8 quantizer runs per element, against the
// IEEE division on the host: the same fp32 bits for every quotient that is not subnormal, over scales and values
// spread across the exponent range, the recipe's scales, and the special values. A quantizer built on it is
// bit-exact only if this holds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fp8_convert.cuh"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

__global__ void divide_kernel(const float* x, const float* s, float* q, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) q[i] = cuda::divide_by_scale(x[i], s[i], __frcp_rn(s[i]));
}

std::vector<float> divide_on_gpu(const std::vector<float>& x, const std::vector<float>& s) {
  const size_t bytes = x.size() * sizeof(float);
  float *dx = nullptr, *ds = nullptr, *dq = nullptr;
  GPT_CUDA_CHECK(cudaMalloc(&dx, bytes));
  GPT_CUDA_CHECK(cudaMalloc(&ds, bytes));
  GPT_CUDA_CHECK(cudaMalloc(&dq, bytes));
  GPT_CUDA_CHECK(cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice));
  GPT_CUDA_CHECK(cudaMemcpy(ds, s.data(), bytes, cudaMemcpyHostToDevice));
  const int n = static_cast<int>(x.size());
  divide_kernel<<<(n + 255) / 256, 256>>>(dx, ds, dq, n);
  GPT_CUDA_CHECK(cudaGetLastError());
  std::vector<float> q(x.size());
  GPT_CUDA_CHECK(cudaMemcpy(q.data(), dq, bytes, cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(ds);
  cudaFree(dq);
  return q;
}

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Expects the GPU quotients to equal x / s bit for bit (NaN to be NaN), skipping subnormal quotients.
void expect_ieee_quotients(const std::vector<float>& x, const std::vector<float>& s) {
  const std::vector<float> q = divide_on_gpu(x, s);
  int compared = 0, mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = x[i] / s[i];
    if (std::fpclassify(want) == FP_SUBNORMAL) continue;
    ++compared;
    const bool same = std::isnan(want) ? std::isnan(q[i]) : bits_of(q[i]) == bits_of(want);
    if (!same && ++mismatches <= 5) {
      ADD_FAILURE() << x[i] << " / " << s[i] << ": got " << q[i] << ", IEEE " << want;
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << compared << " quotients";
  EXPECT_GT(compared, static_cast<int>(x.size()) / 2);
}

TEST(Fp8Divide, MatchesIeeeDivisionAcrossTheExponentRange) {
  GPT_REQUIRE_CUDA();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> x_exp(-60, 60), s_exp(-40, 40), sign(0, 1);
  std::vector<float> x, s;
  for (int i = 0; i < 1 << 21; ++i) {
    x.push_back((sign(rng) ? -1.0f : 1.0f) * std::ldexp(mantissa(rng), x_exp(rng)));
    s.push_back(std::ldexp(mantissa(rng), s_exp(rng)));
  }
  expect_ieee_quotients(x, s);
}

TEST(Fp8Divide, MatchesIeeeDivisionAtTheRecipeScalesAndSpecials) {
  GPT_REQUIRE_CUDA();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  // §7.1 / §7.2 scales, scales whose significand is all ones, and a subnormal scale (its reciprocal overflows).
  const std::vector<float> scales = {100.0f / 448,
                                     1.6f / 448,
                                     0.75f / 448 / 8,
                                     1.80f * 37.5f / 448,
                                     1.12f * 0.02f / 448,
                                     std::nextafter(2.0f, 0.0f),
                                     std::nextafter(1.0f, 0.0f),
                                     3.0f,
                                     1e-39f};
  std::vector<float> values = {0.0f, -0.0f, inf, -inf, nan, big, -big, tiny, 448.0f, 464.0f, 57344.0f, 1.0f, 1e-20f};
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.0f, 300.0f);
  for (int i = 0; i < 20000; ++i) values.push_back(normal(rng));
  std::vector<float> x, s;
  for (float sc : scales) {
    for (float v : values) {
      x.push_back(v);
      s.push_back(sc);
    }
  }
  expect_ieee_quotients(x, s);
}

}  // namespace
}  // namespace gpt
