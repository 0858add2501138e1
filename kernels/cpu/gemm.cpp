// CPU reference of kernels/gemm.h through OpenBLAS. bf16 operands are widened to fp32 (exact), multiplied with
// fp32 accumulation and rounded once when stored, which is the §0.4 contract.
#include <cblas.h>

#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/gemm.h"

namespace gpt::cpu {

namespace {

std::vector<float> widen(const Tensor& t) {
  const bf16* p = t.data<bf16>();
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(p[i]);
  return out;
}

template <typename S>
void blas(const GemmShape& s, const GemmArgs& args, const S* a, const S* b, S* c, float beta) {
  const auto ta = args.trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = args.trans_b ? CblasTrans : CblasNoTrans;
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  const int lda = args.trans_a ? m : k;
  const int ldb = args.trans_b ? k : n;
  for (int64_t i = 0; i < s.batch; ++i) {
    const S* ai = a + (s.a_batched ? i * s.m * s.k : 0);
    const S* bi = b + (s.b_batched ? i * s.k * s.n : 0);
    S* ci = c + (s.c_batched ? i * s.m * s.n : 0);
    if constexpr (std::is_same_v<S, double>) {
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, args.alpha, ai, lda, bi, ldb, beta, ci, n);
    } else {
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, args.alpha, ai, lda, bi, ldb, beta, ci, n);
    }
  }
}

}  // namespace

void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmArgs& args) {
  const GemmShape s = gemm_shape(a, b, c, args);
  if (a.dtype() == DType::f64) {
    blas<double>(s, args, a.data<double>(), b.data<double>(), c.data<double>(), args.beta);
    return;
  }
  if (a.dtype() == DType::f32 && c.dtype() == DType::f32) {
    blas<float>(s, args, a.data<float>(), b.data<float>(), c.data<float>(), args.beta);
    return;
  }
  GPT_CHECK(a.dtype() == DType::bf16, "gemm: unsupported dtype ", a.describe());
  const std::vector<float> af = widen(a), bf = widen(b);
  if (c.dtype() == DType::f32) {
    blas<float>(s, args, af.data(), bf.data(), c.data<float>(), args.beta);
    return;
  }
  // bf16 output: accumulate in an fp32 buffer seeded with C (for beta), round once.
  std::vector<float> cf = args.beta != 0.0f ? widen(c) : std::vector<float>(static_cast<size_t>(c.numel()), 0.0f);
  blas<float>(s, args, af.data(), bf.data(), cf.data(), args.beta);
  bf16* cp = c.data<bf16>();
  for (size_t i = 0; i < cf.size(); ++i) cp[i] = bf16(cf[i]);
}

}  // namespace gpt::cpu
