#pragma once
// RAII owners of cuBLASLt objects (handle, matmul descriptor, matrix layouts, preference) and the status check.
#include <cublasLt.h>

#include <memory>
#include <type_traits>

#include "base/check.h"

#define GPT_CUBLAS_CHECK(expr)                                                     \
  do {                                                                             \
    cublasStatus_t gpt_cublas_status_ = (expr);                                    \
    if (gpt_cublas_status_ != CUBLAS_STATUS_SUCCESS)                               \
      GPT_FAIL("cuBLASLt error ", cublasLtGetStatusName(gpt_cublas_status_), " (", \
               cublasLtGetStatusString(gpt_cublas_status_), ") in ", #expr);       \
  } while (0)

namespace gpt::cuda::lt {

namespace detail {
template <typename P, cublasStatus_t (*Destroy)(P)>
struct Deleter {
  void operator()(P p) const noexcept { Destroy(p); }
};
}  // namespace detail

// The opaque cuBLASLt types are pointers to incomplete structs: unique_ptr over the pointee.
using Handle =
    std::unique_ptr<std::remove_pointer_t<cublasLtHandle_t>, detail::Deleter<cublasLtHandle_t, cublasLtDestroy>>;
using MatmulDesc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>,
                                   detail::Deleter<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>>;
using Layout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>,
                               detail::Deleter<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>>;
using Preference = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                                   detail::Deleter<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>>;

inline Handle make_handle() {
  cublasLtHandle_t h = nullptr;
  GPT_CUBLAS_CHECK(cublasLtCreate(&h));
  return Handle(h);
}

inline MatmulDesc make_matmul_desc(cublasComputeType_t compute, cudaDataType_t scale) {
  cublasLtMatmulDesc_t d = nullptr;
  GPT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, compute, scale));
  return MatmulDesc(d);
}

inline Layout make_layout(cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  GPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld));
  return Layout(l);
}

inline Preference make_preference() {
  cublasLtMatmulPreference_t p = nullptr;
  GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p));
  return Preference(p);
}

template <typename T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& value) {
  GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(T)));
}
template <typename T>
void set(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const T& value) {
  GPT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, attr, &value, sizeof(T)));
}
template <typename T>
void set(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof(T)));
}

}  // namespace gpt::cuda::lt
