// CPU reference of kernels/gemm.h through OpenBLAS. bf16 operands are widened to fp32 (exact), multiplied with
// fp32 accumulation and rounded once when stored, which is the §0.4 contract.
//
// Builds without BLAS (SPEEDRUN_GPU_ONLY on device machines that lack OpenBLAS) use a plain loop with the same
// accumulation type instead; it is only meant for test-sized products.
#ifdef SPEEDRUN_HAVE_BLAS
#include <cblas.h>
#endif
#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/fp8.h"
#include "kernels/gemm.h"

#ifdef SPEEDRUN_HAVE_BLAS
// OpenBLAS's thread control (weak: absent with other BLAS libraries).
extern "C" void openblas_set_num_threads(int) __attribute__((weak));
#endif

namespace gpt::cpu {

namespace {

std::vector<float> widen(const Tensor& t) {
  const bf16* p = t.data<bf16>();
  const int64_t n = t.numel();
  std::vector<float> out(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 16))
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<float>(p[i]);
  return out;
}

#ifdef SPEEDRUN_HAVE_BLAS
// The CPU backend has one thread pool, OpenMP's: BLAS runs single-threaded inside it and the product is split
// into blocks of C's rows or columns, one per thread. Two pools (OpenMP and OpenBLAS's own threads) on the same
// cores spin against each other between calls, which cost a third of the `tiny` run on 2 cores. Every element of
// C is still one K-long dot product computed by the same BLAS kernel, whatever the split.
void use_single_threaded_blas() {
  static const bool done = [] {
    if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
    return true;
  }();
  (void)done;
}

template <typename S>
void blas_call(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const S* a, int lda, const S* b, int ldb,
               float beta, S* c, int ldc) {
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<S, double>) {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

// Products below this many multiply-adds run on one thread (splitting costs more than it saves).
constexpr int64_t kSplitMinWork = int64_t{1} << 18;

template <typename S>
void blas(const GemmShape& s, const GemmArgs& args, const S* a, const S* b, S* c, float beta) {
  use_single_threaded_blas();
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  const int lda = args.trans_a ? m : k;
  const int ldb = args.trans_b ? k : n;
  const int threads = s.m * s.n * s.k * s.batch >= kSplitMinWork ? omp_get_max_threads() : 1;
  // Split the batch when it has enough entries, otherwise the longer of C's dimensions.
  const bool split_batch = s.batch >= threads;
  const bool split_rows = !split_batch && m >= n;
  const int64_t extent = split_batch ? s.batch : split_rows ? m : n;
  const int64_t parts = std::min<int64_t>(threads, extent);
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(parts)) if (parts > 1)
  for (int64_t part = 0; part < parts; ++part) {
    const int64_t lo = extent * part / parts, hi = extent * (part + 1) / parts;
    for (int64_t i = split_batch ? lo : 0; i < (split_batch ? hi : s.batch); ++i) {
      const S* ai = a + (s.a_batched ? i * s.m * s.k : 0);
      const S* bi = b + (s.b_batched ? i * s.k * s.n : 0);
      S* ci = c + (s.c_batched ? i * s.m * s.n : 0);
      if (split_batch) {
        blas_call(args.trans_a, args.trans_b, m, n, k, args.alpha, ai, lda, bi, ldb, beta, ci, n);
      } else if (split_rows) {  // rows [lo, hi) of C: rows of op(A)
        const S* a_rows = args.trans_a ? ai + lo : ai + lo * lda;
        blas_call(args.trans_a, args.trans_b, static_cast<int>(hi - lo), n, k, args.alpha, a_rows, lda, bi, ldb, beta,
                  ci + lo * n, n);
      } else {  // columns [lo, hi) of C: columns of op(B)
        const S* b_cols = args.trans_b ? bi + lo * ldb : bi + lo;
        blas_call(args.trans_a, args.trans_b, m, static_cast<int>(hi - lo), k, args.alpha, ai, lda, b_cols, ldb, beta,
                  ci + lo, n);
      }
    }
  }
}
#else
// C = alpha·op(A)·op(B) + beta·C per batch; op(B) is first copied K-major so the inner loop runs along C's rows.
template <typename S>
void blas(const GemmShape& s, const GemmArgs& args, const S* a, const S* b, S* c, float beta) {
  const int64_t m = s.m, n = s.n, k = s.k;
  std::vector<S> bt(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < s.batch; ++i) {
    const S* ai = a + (s.a_batched ? i * m * k : 0);
    const S* bi = b + (s.b_batched ? i * k * n : 0);
    S* ci = c + (s.c_batched ? i * m * n : 0);
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) bt[p * n + j] = args.trans_b ? bi[j * k + p] : bi[p * n + j];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
      std::vector<S> row(static_cast<size_t>(n), S(0));
      for (int64_t p = 0; p < k; ++p) {
        const S x = args.trans_a ? ai[p * m + r] : ai[r * k + p];
        const S* bp = bt.data() + p * n;
        for (int64_t j = 0; j < n; ++j) row[j] += x * bp[j];
      }
      S* cr = ci + r * n;
      for (int64_t j = 0; j < n; ++j) {
        const S scaled = static_cast<S>(args.alpha) * row[j];
        cr[j] = beta == 0.0f ? scaled : scaled + static_cast<S>(beta) * cr[j];  // beta = 0 ignores C (NaN-safe)
      }
    }
  }
}
#endif

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

void gemm_fp8(const Tensor& a, const Tensor& b, Tensor& c, const Tensor& scale_a, const Tensor& scale_b,
              const Fp8GemmArgs& args) {
  // Dequantize (fp8 values are exact in f32; times the scale: one f32 rounding per element), then an f32 product
  // C = A·Bᵀ, which is the same math as the tensor cores' fp32 accumulation up to summation order.
  auto decode = [](const Tensor& t, float scale) {
    const auto* p = static_cast<const uint8_t*>(t.raw());
    const bool e4m3 = t.dtype() == DType::e4m3;
    std::vector<float> out(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < out.size(); ++i) out[i] = (e4m3 ? e4m3_to_float(p[i]) : e5m2_to_float(p[i])) * scale;
    return out;
  };
  const std::vector<float> af = decode(a, scale_a.data<float>()[0]);
  const std::vector<float> bf = decode(b, scale_b.data<float>()[0]);
  const GemmShape s{.batch = 1, .m = a.size(0), .n = b.size(0), .k = a.size(1)};
  const GemmArgs g{.trans_a = false, .trans_b = true, .alpha = args.alpha, .beta = args.beta};
  if (c.dtype() == DType::f32) {
    blas<float>(s, g, af.data(), bf.data(), c.data<float>(), args.beta);
    return;
  }
  std::vector<float> cf = args.beta != 0.0f ? widen(c) : std::vector<float>(static_cast<size_t>(c.numel()), 0.0f);
  blas<float>(s, g, af.data(), bf.data(), cf.data(), args.beta);
  bf16* cp = c.data<bf16>();
  for (size_t i = 0; i < cf.size(); ++i) cp[i] = bf16(cf[i]);
}

}  // namespace gpt::cpu
