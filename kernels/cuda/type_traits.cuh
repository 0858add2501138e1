#pragma once
// Device-side counterparts of kernels/cpu/dispatch.h: storage types and accumulation types (the warp reductions
// are in device_utils.cuh).
#include <cuda_bf16.h>

#include "kernels/tensor.h"

namespace gpt::cuda {

template <typename A, typename T>
__device__ __forceinline__ A to_acc(T v) {
  return static_cast<A>(v);
}
template <>
__device__ __forceinline__ float to_acc<float, __nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T, typename A>
__device__ __forceinline__ T from_acc(A v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Device pointer of a tensor as the kernel's storage type (bf16 tensors as __nv_bfloat16).
template <typename T>
T* device_ptr(const Tensor& t) {
  GPT_CHECK(t.device() == Device::cuda, "expected a CUDA tensor, got ", t.describe());
  return static_cast<T*>(const_cast<void*>(t.raw()));
}

// Calls f.template operator()<T, A>() with the storage type T and accumulation type A of a floating dtype.
template <typename F>
void dispatch_floating_cuda(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f64:
      f.template operator()<double, double>();
      return;
    case DType::f32:
      f.template operator()<float, float>();
      return;
    case DType::bf16:
      f.template operator()<__nv_bfloat16, float>();
      return;
    default:
      GPT_FAIL(op, ": unsupported dtype ", dtype_name(dtype));
  }
}

}  // namespace gpt::cuda
