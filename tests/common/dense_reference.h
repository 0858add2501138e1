#pragma once
// Row-major double matrices and the steps the orthogonalising optimizers share (NorMuon's Polar Express, §4.3;
// ANVIL's six maps, §S.8), written as plain loops for the step-by-step references of their tests. `round` is where
// the recipe rounds: identity for exact double math, bf16 rounding to emulate the bf16 path.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpt::test {

using Mat = std::vector<double>;  // row-major

inline Mat matmul(const Mat& a, const Mat& b, int64_t m, int64_t k, int64_t n) {
  Mat c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}

inline Mat transpose(const Mat& a, int64_t m, int64_t n) {
  Mat t(a.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) t[j * m + i] = a[i * n + j];
  return t;
}

// The short-side Gram matrix of x [rows × cols] (XᵀX when tall, else XXᵀ), rounded.
template <typename Round>
Mat short_side_gram(const Mat& x, int64_t rows, int64_t cols, Round round) {
  const Mat xt = transpose(x, rows, cols);
  Mat a = rows > cols ? matmul(xt, x, cols, rows, cols) : matmul(x, xt, rows, cols, rows);
  for (double& v : a) v = round(v);
  return a;
}

// One polynomial map X ← a·X + (c·A² + b·A)·X (A·X from the short side: X·B when tall, else B·X), with the
// coefficients taken as floats as the op's GEMM scalars are.
template <typename Round>
void apply_polynomial_map(Mat& x, const Mat& A, int64_t rows, int64_t cols, const double coefficients[3], Round round) {
  const bool tall = rows > cols;
  const int64_t k = tall ? cols : rows;
  const double ca = static_cast<float>(coefficients[0]), cb = static_cast<float>(coefficients[1]),
               cc = static_cast<float>(coefficients[2]);
  const Mat AA = matmul(A, A, k, k, k);
  Mat B(A.size());
  for (size_t e = 0; e < B.size(); ++e) B[e] = round(cc * AA[e] + cb * A[e]);
  const Mat BX = tall ? matmul(x, B, rows, cols, cols) : matmul(B, x, rows, rows, cols);
  for (size_t e = 0; e < x.size(); ++e) x[e] = round(ca * x[e] + BX[e]);
}

}  // namespace gpt::test
