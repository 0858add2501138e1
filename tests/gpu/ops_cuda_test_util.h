#pragma once
// Helpers of the CUDA op tests (embedding, elementwise, smear, bigram, activation, softcap loss, fp8, transpose):
// NaN poisoning of outputs, relative Frobenius errors against the CPU reference, random ids.
//
// Tolerances (‖gpu − cpu‖ / ‖cpu‖ over all elements, same inputs): f64 1e-12; f32 1e-5 (summation order and a few
// ulp of fast intrinsics); bf16 5e-3 (one bf16 ulp is 2^-8 relative, and only elements near a rounding tie flip).
// Any non-finite GPU element fails.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/tensor.h"
#include "tests/common/gradcheck.h"
#include "tests/common/tape_lockstep.h"

namespace gpt::ops_cuda_testing {

inline double tolerance_for(DType dtype) {
  return dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 1e-5 : 5e-3;
}

// Every byte 0xFF: NaN in f64, f32 and bf16, so an element the kernel never wrote fails the comparison.
inline void poison(Tensor& t) {
  ASSERT_FALSE(t.is_cpu());
  GPT_CUDA_CHECK(cudaMemset(t.raw(), 0xFF, t.nbytes()));
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
}

inline double relative_frobenius(const std::vector<double>& a, const std::vector<double>& b) {
  return testing::relative_error(a, b);
}

// GPU tensor (any floating dtype) against the CPU reference tensor.
inline double rel_error(const Tensor& gpu, const Tensor& cpu) {
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  return relative_frobenius(gpu.to_doubles(), cpu.to_doubles());
}

// Random values in [lo, hi) as int32 or int64 CPU tensor.
inline Tensor random_ids(int64_t n, int64_t lo, int64_t hi, uint64_t seed, DType dtype = DType::i32) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi - 1);
  Tensor t = Tensor::empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::i32) {
      t.data<int32_t>()[i] = static_cast<int32_t>(dist(rng));
    } else {
      t.data<int64_t>()[i] = dist(rng);
    }
  }
  return t;
}

inline Tensor gpu(const Tensor& t) { return t.to(Device::cuda); }

// A [1] scalar of the given dtype.
inline Tensor scalar_tensor(double v, DType dtype) { return Tensor::from_doubles(std::vector<double>{v}, {1}, dtype); }

}  // namespace gpt::ops_cuda_testing

#define GPT_REQUIRE_CUDA_DEVICE()                                            \
  do {                                                                       \
    if (!::gpt::cuda_available()) GTEST_FAIL() << "no CUDA device visible"; \
  } while (0)
