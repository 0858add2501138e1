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
#include "kernels/elementwise.h"
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

// The residual mixes' terms (§2.8) over x_0 … x_{n-1}, by k mod 4: ρ·x, π·a, G[:, 18 + k]·x_k (with
// `grouped_lanes`: six lane groups from lane 0, the per-head gates the one-pass kernels do not take) and
// σ(π)·(0.5 + G[:, 19])·x_k.
inline std::vector<MixTerm> residual_mix_terms(const std::vector<Tensor>& x, const Tensor& rho, const Tensor& pi,
                                               const Tensor& lanes, bool grouped_lanes = false) {
  std::vector<MixTerm> t;
  for (size_t k = 0; k < x.size(); ++k) {
    switch (k % 4) {
      case 0:
        t.push_back({x[k], Coef::of_scalar(rho)});
        break;
      case 1:
        t.push_back({x[k], Coef::of_scalar(pi)});
        break;
      case 2:
        t.push_back(
            {x[k], grouped_lanes ? Coef::of_lane(lanes, 0, 6) : Coef::of_lane(lanes, 18 + static_cast<int64_t>(k))});
        break;
      default:
        t.push_back({x[k], Coef::sigmoid_scalar(pi).times_lane(lanes, 19).plus(0.5f)});
        break;
    }
  }
  return t;
}

}  // namespace gpt::ops_cuda_testing

#define GPT_REQUIRE_CUDA_DEVICE() GPT_REQUIRE_CUDA()
