#pragma once
// Helpers for CPU reference kernels: dtype dispatch and the accumulation type.
//
// CPU kernels are templates over the storage type T (double, float, bf16). Storing into T is the
// rounding point of §0.4: bf16 tensors reproduce the GPU's rounding, f64 tensors give exact math for
// finite-difference gradient checks. Arithmetic runs in acc_t<T> (double for f64, else float).
#include <type_traits>

#include "kernels/tensor.h"

namespace gpt::cpu {

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
inline acc_t<T> load(T v) {
  return static_cast<acc_t<T>>(v);
}
template <>
inline float load<bf16>(bf16 v) {
  return static_cast<float>(v);
}

template <typename T, typename A>
inline T store(A v) {
  if constexpr (std::is_same_v<T, bf16>) {
    return bf16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Calls f.template operator()<T>() with T matching a floating dtype.
template <typename F>
void dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f64:
      f.template operator()<double>();
      return;
    case DType::f32:
      f.template operator()<float>();
      return;
    case DType::bf16:
      f.template operator()<bf16>();
      return;
    default:
      GPT_FAIL(op, ": unsupported dtype ", dtype_name(dtype), " (expected f64, f32 or bf16)");
  }
}

}  // namespace gpt::cpu
