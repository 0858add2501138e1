// NorMuon + Polar Express (RECIPE §4.3) against a step-by-step reference written here with plain loops in double.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/check.h"
#include "kernels/normuon.h"
#include "tests/common/dense_reference.h"

namespace gpt {
namespace {

using test::Mat;
using test::matmul;
using test::transpose;

// Reference state and step for one stack. `bf` emulates the bf16 rounding points (values computed in double,
// rounded where the recipe rounds); otherwise exact double math. GEMM scalars are fp32 in the op (as in cuBLAS),
// so the polynomial coefficients are taken as floats here too.
struct RefNorMuon {
  int64_t count, rows, cols;
  bool bf;
  std::vector<Mat> p, mom, s;

  double R(double x) const { return bf ? static_cast<double>(round_bf16(static_cast<float>(x))) : x; }

  void step(const std::vector<Mat>& grads, const NorMuonArgs& a) {
    const bool per_row = rows >= cols;
    const int64_t stats = per_row ? rows : cols, q = per_row ? cols : rows;
    const double shape_mult = std::sqrt(std::max(1.0, static_cast<double>(rows) / cols));
    for (int64_t mi = 0; mi < count; ++mi) {
      const size_t n = static_cast<size_t>(rows * cols);
      Mat x(n);
      for (size_t e = 0; e < n; ++e) {
        mom[mi][e] = a.momentum * mom[mi][e] + (1 - a.momentum) * grads[mi][e];
        x[e] = R((1 - a.momentum) * grads[mi][e] + a.momentum * mom[mi][e]);
      }
      double ss = 0;
      for (double v : x) ss += v * v;
      const double denom = R(R(R(std::sqrt(ss)) * 1.02) + 1e-6);
      for (double& v : x) v = R(v / denom);
      const auto round = [this](double v) { return R(v); };
      for (const auto& c3 : kPolarExpress) {
        test::apply_polynomial_map(x, test::short_side_gram(x, rows, cols, round), rows, cols, c3, round);
      }
      Mat r(static_cast<size_t>(stats), 0.0);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) r[per_row ? i : j] += x[i * cols + j] * x[i * cols + j] / q;
      double sum_r = 0, sum_rg2 = 0;
      Mat g(static_cast<size_t>(stats));
      for (int64_t t = 0; t < stats; ++t) {
        sum_r += r[t];
        s[mi][t] = a.beta2 * s[mi][t] + (1 - a.beta2) * r[t];
        g[t] = 1 / std::sqrt(std::max(s[mi][t], 1e-10));
        sum_rg2 += r[t] * g[t] * g[t];
      }
      const double nu = std::sqrt(q * sum_r), nu2 = std::sqrt(q * sum_rg2);
      const double mat_mult = (a.first_matrix + mi) % 2 == 1 ? a.odd_matrix_lr_mul : 1.0;
      const double lr_eff = a.lr * shape_mult * mat_mult;
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const double scale = R(g[per_row ? i : j] * nu / std::max(nu2, 1e-10));
          const double u = R(x[i * cols + j] * scale);
          double& pe = p[mi][i * cols + j];
          const double decayed = u * pe >= 0 ? pe - pe * (a.weight_decay * a.lr * lr_eff) : pe;
          pe = decayed - u * lr_eff;
          if (bf) pe = static_cast<float>(pe);  // the fp32 master
        }
      }
    }
  }
};

std::vector<Mat> random_stack(int64_t count, int64_t rows, int64_t cols, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, scale);
  std::vector<Mat> out(static_cast<size_t>(count), Mat(static_cast<size_t>(rows * cols)));
  for (auto& m : out)
    for (double& v : m) v = nd(rng);
  return out;
}

Tensor to_tensor(const std::vector<Mat>& stack, int64_t rows, int64_t cols, DType dt) {
  std::vector<double> flat;
  for (const auto& m : stack) flat.insert(flat.end(), m.begin(), m.end());
  return Tensor::from_doubles(flat, {static_cast<int64_t>(stack.size()), rows, cols}, dt);
}

NorMuonArgs args_at(int step, double odd_mul, int64_t first) {
  NorMuonArgs a;
  a.momentum = 0.85 + 0.03 * step;
  a.lr = 0.023 * (1.5 - 0.2 * step);
  a.weight_decay = 1.2;
  a.odd_matrix_lr_mul = odd_mul;
  a.first_matrix = first;
  return a;
}

// Runs `steps` updates of the op (f64) and the reference and compares parameters and state.
void check_f64(int64_t count, int64_t rows, int64_t cols, double odd_mul, int64_t first) {
  const auto p0 = random_stack(count, rows, cols, 7, 0.05);
  Tensor p = to_tensor(p0, rows, cols, DType::f64);
  NorMuonState st = NorMuonState::zeros(p);
  const int64_t stats = rows >= cols ? rows : cols;
  RefNorMuon ref{count,
                 rows,
                 cols,
                 false,
                 p0,
                 std::vector<Mat>(count, Mat(rows * cols, 0.0)),
                 std::vector<Mat>(count, Mat(stats, 0.0))};
  for (int step = 0; step < 3; ++step) {
    const auto g = random_stack(count, rows, cols, 100 + step, 1.0 + step);
    Tensor gt = to_tensor(g, rows, cols, DType::f64);
    normuon_update(p, gt, st, args_at(step, odd_mul, first));
    ref.step(g, args_at(step, odd_mul, first));
  }
  const auto pp = p.to_doubles(), mm = st.momentum.to_doubles(), ss = st.second_moment.to_doubles();
  for (int64_t k = 0; k < count; ++k) {
    for (int64_t e = 0; e < rows * cols; ++e) {
      ASSERT_NEAR(pp[k * rows * cols + e], ref.p[k][e], 1e-13) << "matrix " << k << " element " << e;
      ASSERT_NEAR(mm[k * rows * cols + e], ref.mom[k][e], 1e-14);
    }
    for (int64_t t = 0; t < stats; ++t) ASSERT_NEAR(ss[k * stats + t], ref.s[k][t], 1e-12 * (1 + ref.s[k][t]));
  }
}

TEST(NorMuon, F64WideMatchesReference) { check_f64(3, 4, 6, 1.0, 0); }    // qk-like: per-column stats
TEST(NorMuon, F64SquareMatchesReference) { check_f64(2, 5, 5, 1.0, 0); }  // vo-like: per-row stats
TEST(NorMuon, F64TallMatchesReference) { check_f64(4, 8, 2, 2.0, 0); }    // mlp-like: XᵀX, shape_mult 2
TEST(NorMuon, F64OddMatrixMultiplierFollowsGlobalIndex) { check_f64(3, 8, 2, 2.0, 5); }

TEST(NorMuon, UpdateMagnitudeFollowsLrEff) {
  // Tall matrices: lr_eff = lr·2 (shape_mult) and ×2 more on odd global indices. With P = 0 the decay is zero,
  // so the update is −U·lr_eff; U has the same Frobenius norm for matrices with the same gradient.
  const int64_t rows = 8, cols = 2;
  auto g1 = random_stack(1, rows, cols, 3, 1.0);
  std::vector<Mat> g{g1[0], g1[0]};
  Tensor p = Tensor::zeros({2, rows, cols}, DType::f64);
  NorMuonState st = NorMuonState::zeros(p);
  NorMuonArgs a = args_at(0, 2.0, 0);
  normuon_update(p, to_tensor(g, rows, cols, DType::f64), st, a);
  const auto pp = p.to_doubles();
  double n0 = 0, n1 = 0;
  for (int64_t e = 0; e < rows * cols; ++e) {
    n0 += pp[e] * pp[e];
    n1 += pp[rows * cols + e] * pp[rows * cols + e];
  }
  EXPECT_NEAR(std::sqrt(n1 / n0), 2.0, 1e-12);
}

TEST(NorMuon, ZeroGradientOnlyDecays) {
  // §2.2: U = 0 for a zero gradient, the mask [0 ≥ 0] is on, so P ← P·(1 − wd·lr·lr_eff).
  const int64_t rows = 6, cols = 3;
  const auto p0 = random_stack(1, rows, cols, 11, 0.1);
  Tensor p = to_tensor(p0, rows, cols, DType::f64);
  NorMuonState st = NorMuonState::zeros(p);
  const NorMuonArgs a = args_at(1, 1.0, 0);
  normuon_update(p, Tensor::zeros({1, rows, cols}, DType::f64), st, a);
  const double lr_eff = a.lr * std::sqrt(2.0);
  const auto pp = p.to_doubles();
  for (int64_t e = 0; e < rows * cols; ++e) EXPECT_NEAR(pp[e], p0[0][e] * (1 - 1.2 * a.lr * lr_eff), 1e-15);
}

TEST(NorMuon, PolarExpressOrthogonalizes) {
  // After normalisation and the five iterations the singular values lie near 1: XXᵀ ≈ I (loose band).
  const int64_t rows = 6, cols = 20;
  Tensor x = to_tensor(random_stack(1, rows, cols, 5, 1.0), rows, cols, DType::f64);
  normuon_normalize(x);
  polar_express(x);
  const Mat xv = x.to_doubles();
  const Mat g = matmul(xv, transpose(xv, rows, cols), rows, cols, rows);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < rows; ++j) {
      if (i == j) {
        EXPECT_GT(g[i * rows + j], 0.5);
        EXPECT_LT(g[i * rows + j], 1.5);
      } else {
        EXPECT_LT(std::fabs(g[i * rows + j]), 0.3);
      }
    }
  }
}

// bf16 path against the reference with the same rounding points; GEMM summation order differs (fp32 blocks vs
// double), which can flip single bf16 roundings, so the comparison allows a small fraction of the update.
void check_bf16(int64_t count, int64_t rows, int64_t cols) {
  const auto p0 = random_stack(count, rows, cols, 21, 0.05);
  Tensor p = to_tensor(p0, rows, cols, DType::bf16);
  std::vector<Mat> start(static_cast<size_t>(count));
  const auto pv = p.to_doubles();
  for (int64_t k = 0; k < count; ++k) start[k].assign(pv.begin() + k * rows * cols, pv.begin() + (k + 1) * rows * cols);
  NorMuonState st = NorMuonState::zeros(p);
  const int64_t stats = rows >= cols ? rows : cols;
  RefNorMuon ref{count,
                 rows,
                 cols,
                 true,
                 start,
                 std::vector<Mat>(count, Mat(rows * cols, 0.0)),
                 std::vector<Mat>(count, Mat(stats, 0.0))};
  for (int step = 0; step < 2; ++step) {
    Tensor gt = to_tensor(random_stack(count, rows, cols, 200 + step, 0.01), rows, cols, DType::bf16);
    const auto gd = gt.to_doubles();
    std::vector<Mat> g(static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) g[k].assign(gd.begin() + k * rows * cols, gd.begin() + (k + 1) * rows * cols);
    normuon_update(p, gt, st, args_at(step, 2.0, 0));
    ref.step(g, args_at(step, 2.0, 0));
  }
  const bf16* pb = p.data<bf16>();
  const uint16_t* mb = st.mantissa.data<uint16_t>();
  double max_diff = 0, max_update = 0;
  for (int64_t k = 0; k < count; ++k) {
    for (int64_t e = 0; e < rows * cols; ++e) {
      const int64_t idx = k * rows * cols + e;
      const double master = join_master(pb[idx], mb[idx]);
      max_diff = std::max(max_diff, std::fabs(master - ref.p[k][e]));
      max_update = std::max(max_update, std::fabs(ref.p[k][e] - start[k][e]));
      // The stored weight is the truncated master: its bits are the master's upper half.
      EXPECT_EQ(pb[idx].bits, static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(master)) >> 16));
    }
  }
  EXPECT_GT(max_update, 0.0);
  EXPECT_LT(max_diff, 0.05 * max_update) << "max |master − reference| " << max_diff << " vs update " << max_update;
}

TEST(NorMuon, Bf16WideMatchesRoundedReference) { check_bf16(2, 16, 32); }
TEST(NorMuon, Bf16TallMatchesRoundedReference) { check_bf16(2, 48, 12); }

TEST(NorMuon, MantissaSplitTruncates) {
  // 1 + 2^-8 + 2^-9 has low bits 0xC000: rounding would carry into the weight, truncation must not.
  const float f = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -9);
  bf16 w;
  uint16_t mant = 0;
  split_master(f, w, mant);
  EXPECT_EQ(w.bits, 0x3f80);
  EXPECT_EQ(mant, 0xC000);
  EXPECT_NE(bf16(f).bits, w.bits);  // round-to-nearest would give 0x3f81
  EXPECT_EQ(join_master(w, mant), f);
  std::mt19937 rng(1);
  for (int i = 0; i < 1000; ++i) {
    const uint32_t bits = rng() & 0xBFFFFFFFu;  // finite values
    const float v = std::bit_cast<float>(bits);
    split_master(v, w, mant);
    EXPECT_EQ(std::bit_cast<uint32_t>(join_master(w, mant)), bits);
  }
}

TEST(NorMuon, ZeroLrKeepsWeightAndMantissaBitwise) {
  const int64_t rows = 4, cols = 8;
  Tensor p = to_tensor(random_stack(2, rows, cols, 9, 0.05), rows, cols, DType::bf16);
  NorMuonState st = NorMuonState::zeros(p);
  std::mt19937 rng(4);
  for (int64_t i = 0; i < st.mantissa.numel(); ++i) st.mantissa.data<uint16_t>()[i] = static_cast<uint16_t>(rng());
  const Tensor p_before = p.clone(), m_before = st.mantissa.clone();
  NorMuonArgs a = args_at(0, 1.0, 0);
  a.lr = 0;
  normuon_update(p, to_tensor(random_stack(2, rows, cols, 10, 1.0), rows, cols, DType::bf16), st, a);
  for (int64_t i = 0; i < p.numel(); ++i) {
    ASSERT_EQ(p.data<bf16>()[i].bits, p_before.data<bf16>()[i].bits);
    ASSERT_EQ(st.mantissa.data<uint16_t>()[i], m_before.data<uint16_t>()[i]);
  }
}

TEST(NorMuon, MantissaAccumulatesUpdatesBelowHalfAnUlp) {
  // Weight 1.0 (bf16 spacing 2^-7 above 1). Updates of ~2^-12 vanish in a plain bf16 store but the master keeps
  // them: after enough steps the weight itself moves.
  const int64_t rows = 2, cols = 2;
  Tensor p = Tensor::from_doubles(std::vector<double>{1, 1, 1, 1}, {1, rows, cols}, DType::bf16);
  NorMuonState st = NorMuonState::zeros(p);
  Tensor g = Tensor::from_doubles(std::vector<double>{-1, 0, 0, -1}, {1, rows, cols}, DType::bf16);
  NorMuonArgs a;
  a.momentum = 0.0;
  a.weight_decay = 0.0;
  a.lr = std::ldexp(1.0, -12);
  normuon_update(p, g, st, a);
  EXPECT_EQ(p.data<bf16>()[0].bits, bf16(1.0f).bits);  // the weight did not move yet...
  EXPECT_NE(st.mantissa.data<uint16_t>()[0], 0);       // ...but the master did
  for (int i = 0; i < 80; ++i) normuon_update(p, g, st, a);
  EXPECT_GT(static_cast<float>(p.data<bf16>()[0]), 1.0f);
  EXPECT_EQ(p.data<bf16>()[1].bits, bf16(1.0f).bits);  // off-diagonal U = 0 there
}

TEST(NorMuon, ShapeErrors) {
  Tensor p = Tensor::zeros({2, 4, 4}, DType::bf16);
  NorMuonState st = NorMuonState::zeros(p);
  Tensor g = Tensor::zeros({2, 4, 5}, DType::bf16);
  EXPECT_THROW(normuon_update(p, g, st, {}), Error);
  Tensor flat = Tensor::zeros({16}, DType::bf16);
  EXPECT_THROW(NorMuonState::zeros(flat), Error);
}

}  // namespace
}  // namespace gpt
