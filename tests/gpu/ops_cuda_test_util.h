#pragma once
// Helpers of the CUDA op tests (embedding, elementwise, smear, bigram, activation, softcap loss, fp8, transpose):
// the shared GPU test helpers (tests/gpu/gpu_test_util.h: NaN poisoning, relative Frobenius errors, tolerances per
// dtype), plus the op tests' own: errors of a GPU tensor against its CPU reference, random ids, scalars.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/tensor.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt::ops_cuda_testing {

using gpu_testing::poison;
using gpu_testing::relative_frobenius;
using gpu_testing::tolerance_for;

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

#define GPT_REQUIRE_CUDA_DEVICE() GPT_REQUIRE_CUDA()
