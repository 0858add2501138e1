#include "kernels/gemm.h"

#include <cmath>
#include <limits>

#include "kernels/dispatch.h"

namespace gpt {

GemmShape gemm_shape(const Tensor& a, const Tensor& b, const Tensor& c, const GemmArgs& args) {
  GPT_CHECK(a.ndim() == 2 || a.ndim() == 3, "gemm: A must be 2-D or 3-D, got ", a.describe());
  GPT_CHECK(b.ndim() == 2 || b.ndim() == 3, "gemm: B must be 2-D or 3-D, got ", b.describe());
  GPT_CHECK(c.ndim() == 2 || c.ndim() == 3, "gemm: C must be 2-D or 3-D, got ", c.describe());
  GemmShape s;
  s.a_batched = a.ndim() == 3;
  s.b_batched = b.ndim() == 3;
  s.c_batched = c.ndim() == 3;
  const int64_t a_rows = a.size(-2), a_cols = a.size(-1);
  const int64_t b_rows = b.size(-2), b_cols = b.size(-1);
  s.m = args.trans_a ? a_cols : a_rows;
  s.k = args.trans_a ? a_rows : a_cols;
  const int64_t kb = args.trans_b ? b_cols : b_rows;
  s.n = args.trans_b ? b_rows : b_cols;
  GPT_CHECK(kb == s.k, "gemm: inner dimensions differ: op(A) is ", s.m, "x", s.k, ", op(B) is ", kb, "x", s.n, " (A ",
            a.describe(), ", B ", b.describe(), ")");
  GPT_CHECK(c.size(-2) == s.m && c.size(-1) == s.n, "gemm: C must be ", s.m, "x", s.n, ", got ", c.describe());
  s.batch = s.c_batched ? c.size(0) : 1;
  if (s.a_batched)
    GPT_CHECK(a.size(0) == s.batch && s.c_batched, "gemm: batch of A ", a.describe(), " vs C ", c.describe());
  if (s.b_batched)
    GPT_CHECK(b.size(0) == s.batch && s.c_batched, "gemm: batch of B ", b.describe(), " vs C ", c.describe());
  GPT_CHECK(a.dtype() == b.dtype(), "gemm: A and B dtypes differ (", a.describe(), ", ", b.describe(), ")");
  GPT_CHECK(c.dtype() == a.dtype() || c.dtype() == DType::f32, "gemm: C dtype must be ", dtype_name(a.dtype()),
            " or f32, got ", c.describe());
  return s;
}

void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmArgs& args) {
  gemm_shape(a, b, c, args);
  check_same_device({&a, &b, &c}, "gemm");
  GPT_BACKEND_CALL(c.device(), gemm, a, b, c, args);
}

void gemm_fp8(const Tensor& a, const Tensor& b, Tensor& c, const Tensor& scale_a, const Tensor& scale_b,
              const Fp8GemmArgs& args) {
  GPT_CHECK(a.ndim() == 2 && b.ndim() == 2 && c.ndim() == 2,
            "gemm_fp8: A [M, K], B [N, K] and C [M, N] must be 2-D, got ", a.describe(), ", ", b.describe(), ", ",
            c.describe());
  const bool a_fp8 = a.dtype() == DType::e4m3 || a.dtype() == DType::e5m2;
  const bool b_fp8 = b.dtype() == DType::e4m3 || b.dtype() == DType::e5m2;
  GPT_CHECK(a_fp8 && b_fp8, "gemm_fp8: A and B must be e4m3 or e5m2, got ", a.describe(), " and ", b.describe());
  GPT_CHECK(!(a.dtype() == DType::e5m2 && b.dtype() == DType::e5m2), "gemm_fp8: e5m2×e5m2 is not supported");
  GPT_CHECK(a.size(1) == b.size(1), "gemm_fp8: A [M, K] and B [N, K] differ in K: ", a.describe(), ", ", b.describe());
  check_shape(c, {a.size(0), b.size(0)}, "gemm_fp8: C");
  GPT_CHECK(c.dtype() == DType::bf16 || c.dtype() == DType::f32, "gemm_fp8: C must be bf16 or f32, got ", c.describe());
  check_shape(scale_a, {1}, "gemm_fp8: scale_a");
  check_shape(scale_b, {1}, "gemm_fp8: scale_b");
  check_dtype(scale_a, DType::f32, "gemm_fp8: scale_a");
  check_dtype(scale_b, DType::f32, "gemm_fp8: scale_b");
  check_same_device({&a, &b, &c, &scale_a, &scale_b}, "gemm_fp8");
  GPT_BACKEND_CALL(c.device(), gemm_fp8, a, b, c, scale_a, scale_b, args);
}

}  // namespace gpt
