#include "kernels/gemm.h"

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
  if (s.a_batched) GPT_CHECK(a.size(0) == s.batch && s.c_batched, "gemm: batch of A ", a.describe(), " vs C ", c.describe());
  if (s.b_batched) GPT_CHECK(b.size(0) == s.batch && s.c_batched, "gemm: batch of B ", b.describe(), " vs C ", c.describe());
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

}  // namespace gpt
