#pragma once
// Scalar parameters on the CPU: [1] tensors of f32 (f64 in gradient checks), read and accumulated as double.
#include <cmath>

#include "kernels/tensor.h"

namespace gpt::cpu {

inline double read_scalar(const Tensor& s) {
  return s.dtype() == DType::f64 ? s.data<double>()[0] : static_cast<double>(s.data<float>()[0]);
}

inline void add_to_scalar(Tensor& s, double v) {
  if (s.dtype() == DType::f64) {
    s.data<double>()[0] += v;
  } else {
    s.data<float>()[0] = static_cast<float>(static_cast<double>(s.data<float>()[0]) + v);
  }
}

// §0.4: an fp32 scalar that multiplies a bf16 tensor is rounded to bf16 first.
template <typename T>
inline double scalar_for(double v) {
  if constexpr (std::is_same_v<T, bf16>) {
    return static_cast<double>(round_bf16(static_cast<float>(v)));
  } else if constexpr (std::is_same_v<T, float>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return v;
  }
}

inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace gpt::cpu
