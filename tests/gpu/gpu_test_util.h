#pragma once
// Helpers shared by the GPU tests: NaN poisoning of outputs, relative Frobenius errors, CPU<->CUDA copies.
//
// Tolerances used across tests/gpu (relative Frobenius error ‖out − ref‖ / ‖ref‖ against the CPU reference run on
// the same inputs): f64 1e-12; f32 results of f32 accumulation 1e-5 (summation order only); bf16 results 5e-3 (a
// one-ulp bf16 rounding flip is 2^-8 relative, and only some elements flip); anything NaN fails.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/tensor.h"
#include "tests/common/gradcheck.h"
#include "tests/common/tape_lockstep.h"

namespace gpt::gpu_testing {

inline constexpr double kTolF64 = 1e-12;
inline constexpr double kTolF32 = 1e-5;
inline constexpr double kTolBf16 = 5e-3;

// Every byte 0xFF: NaN in f64, f32 and bf16, so an element the kernel never wrote fails the comparison.
inline void poison(Tensor& t) {
  if (t.is_cpu()) {
    std::vector<unsigned char> ff(t.nbytes(), 0xFF);
    device_copy(t.raw(), Device::cpu, ff.data(), Device::cpu, ff.size());
    return;
  }
  GPT_CUDA_CHECK(cudaMemset(t.raw(), 0xFF, t.nbytes()));
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
}

// ‖a − b‖ / ‖b‖ over all elements; +inf when any element of a is not finite or the sizes differ.
inline double relative_frobenius(const std::vector<double>& a, const std::vector<double>& b) {
  return testing::relative_error(a, b);
}

inline double relative_frobenius(const Tensor& out, const Tensor& ref) {
  return relative_frobenius(out.to_doubles(), ref.to_doubles());
}

inline double tolerance_for(DType dtype) {
  return dtype == DType::f64 ? kTolF64 : dtype == DType::f32 ? kTolF32 : kTolBf16;
}

// Number of elements whose bytes differ between two tensors of one dtype (any devices): 0 is bit-for-bit equality.
inline int64_t bit_mismatches(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(Device::cpu), hb = b.to(Device::cpu);
  EXPECT_EQ(ha.nbytes(), hb.nbytes());
  if (ha.nbytes() != hb.nbytes()) return -1;
  const size_t width = dtype_size(a.dtype());
  const auto* pa = static_cast<const unsigned char*>(ha.raw());
  const auto* pb = static_cast<const unsigned char*>(hb.raw());
  int64_t diff = 0;
  for (size_t i = 0; i < ha.nbytes(); i += width) diff += std::memcmp(pa + i, pb + i, width) != 0;
  return diff;
}

// A random CPU tensor and its CUDA copy (same values).
struct Pair {
  Tensor cpu, cuda;
};
inline Pair random_pair(const Shape& shape, DType dtype, uint64_t seed, double scale = 1.0) {
  Tensor host = testing::random_tensor(shape, dtype, seed, scale);
  return {host, host.to(Device::cuda)};
}

}  // namespace gpt::gpu_testing

// Fails (not skips) when no CUDA device is visible: the gpu label runs on device machines, where a missing
// device is a broken setup that must not pass as green.
#define GPT_REQUIRE_CUDA()                                                  \
  do {                                                                      \
    if (!::gpt::cuda_available()) GTEST_FAIL() << "no CUDA device visible"; \
  } while (0)
