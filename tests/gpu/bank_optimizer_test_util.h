#pragma once
// Helpers of the bank optimizer tests (NorMuon, ANVIL: kernels/normuon.h, kernels/anvil.h): random mantissa states and
// the fp32 masters of bf16 params, so that an update is compared as new − old master.
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/normuon.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt::gpu_testing {

inline Tensor random_u16(const Shape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor t = Tensor::empty(shape, DType::u16);
  uint16_t* p = t.data<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint16_t>(rng());
  return t;
}

// The fp32 masters of a bf16 param (weight bits above mantissa bits), or the param itself as doubles.
inline std::vector<double> masters(const Tensor& param, const Tensor& mantissa) {
  if (param.dtype() != DType::bf16) return param.to_doubles();
  const Tensor p = param.to(Device::cpu), m = mantissa.to(Device::cpu);
  std::vector<double> out(static_cast<size_t>(p.numel()));
  for (int64_t i = 0; i < p.numel(); ++i) out[i] = join_master(p.data<bf16>()[i], m.data<uint16_t>()[i]);
  return out;
}

inline std::vector<double> difference(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

}  // namespace gpt::gpu_testing
