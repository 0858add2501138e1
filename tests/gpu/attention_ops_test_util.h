#pragma once
// Helpers for the GPU tests of the attention-family side ops (rotary, key offset, value gate, XSA, head
// gate, DC correction): shapes, and comparisons of what a backward ADDED (out − start) on both backends,
// so that the non-zero starting gradients cannot hide an error in the added part.
#include <gtest/gtest.h>

#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace gpt::gpu_testing {

struct TokenShape {
  int64_t tokens, heads, dim;
  Shape shape() const { return {tokens, heads, dim}; }
};
inline constexpr TokenShape kSmallShape{37, 4, 16};
inline constexpr TokenShape kRecipeShape{16384, 6, 128};

inline std::vector<double> minus(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_doubles();
  const std::vector<double> y = b.to_doubles();
  for (size_t i = 0; i < x.size(); ++i) x[i] -= y[i];
  return x;
}

// ‖(gpu − start) − (cpu − start)‖ / ‖cpu − start‖.
inline double added_error(const Tensor& gpu, const Tensor& cpu, const Tensor& start) {
  return relative_frobenius(minus(gpu, start), minus(cpu, start));
}

// Backward tolerance: bf16 gradients go through more rounded intermediates than a single output.
inline double backward_tolerance(DType dtype) { return dtype == DType::bf16 ? 1e-2 : tolerance_for(dtype); }

inline std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

}  // namespace gpt::gpu_testing
