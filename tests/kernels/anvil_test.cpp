// ANVIL (RECIPE §S.8) against a step-by-step reference written here with plain loops in double: the rail
// schedule, the two rails, the Gram normalisation with δ, the six maps, the equalizer of §4.3 and the decay gated
// by the slow rail's sign; then the bf16 path with its mantissa tracking.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/anvil.h"
#include "base/check.h"
#include "tests/common/dense_reference.h"

namespace gpt {
namespace {

using test::Mat;

constexpr int64_t kN = 1194;  // the seed schedule's total steps

// §S.8 step 1 with the seed's numbers written out: {β_r, β_f, w}.
struct RefRails {
  double rail, fast_beta, weight;
};
RefRails ref_rails(int64_t s, int64_t n) {
  double rail = 0.93;
  if (s < 240) {
    rail = 0.85 + 0.08 * static_cast<double>(s) / 240.0;
  } else if (s > n - 50) {
    rail = 0.93 - 0.08 * static_cast<double>(s - (n - 50)) / 50.0;
  }
  if (s < 514) return {rail, rail, 1.0};
  return {rail, 0.85, 0.4385};
}

AnvilArgs args_at(int64_t step, double odd_mul, int64_t first) {
  AnvilArgs a;
  a.step = step;
  a.total_steps = kN;
  a.lr = 0.023 * (1.5 - 0.0004 * static_cast<double>(step));
  a.odd_matrix_lr_mul = odd_mul;
  a.first_matrix = first;
  return a;  // weight_decay 2.25, beta2 0.9 and the rail constants are the defaults under test
}

TEST(AnvilRails, ExtScheduleAtItsBoundaries) {
  for (int64_t s : {int64_t{0}, int64_t{1}, int64_t{239}, int64_t{240}, int64_t{513}, int64_t{514}, kN - 50, kN - 49,
                    kN - 2, kN - 1}) {
    const AnvilRails got = anvil_rails(args_at(s, 1.0, 0));
    const RefRails want = ref_rails(s, kN);
    EXPECT_NEAR(got.rail, want.rail, 1e-15) << "s = " << s;
    EXPECT_NEAR(got.fast_beta, want.fast_beta, 1e-15) << "s = " << s;
    EXPECT_EQ(got.fast_weight, want.weight) << "s = " << s;
  }
  // Spot values, worked by hand.
  EXPECT_NEAR(anvil_rails(args_at(239, 1, 0)).rail, 0.85 + 0.08 * 239 / 240, 1e-15);
  EXPECT_NEAR(anvil_rails(args_at(kN - 49, 1, 0)).rail, 0.9284, 1e-15);
  EXPECT_NEAR(anvil_rails(args_at(kN - 1, 1, 0)).rail, 0.8516, 1e-15);
  EXPECT_EQ(anvil_rails(args_at(kN - 50, 1, 0)).rail, 0.93);
  EXPECT_EQ(anvil_rails(args_at(513, 1, 0)).fast_weight, 1.0);
  EXPECT_EQ(anvil_rails(args_at(514, 1, 0)).fast_beta, 0.85);
}

TEST(AnvilRails, RecipeValuesMoveTheBoundaries) {
  AnvilArgs a = args_at(0, 1, 0);
  a.total_steps = 26;
  a.rail_warmup = 8;
  a.fast_switch = 12;
  a.rail_taper = 5;
  a.fast_weight = 0.25;
  a.step = 4;
  EXPECT_NEAR(anvil_rails(a).rail, 0.85 + 0.08 * 4 / 8, 1e-15);
  a.step = 11;
  EXPECT_EQ(anvil_rails(a).fast_weight, 1.0);
  a.step = 12;
  EXPECT_EQ(anvil_rails(a).fast_weight, 0.25);
  a.step = 25;
  EXPECT_NEAR(anvil_rails(a).rail, 0.93 - 0.08 * 4 / 5, 1e-15);
}

TEST(AnvilRails, StepOutsideTheRunThrows) {
  EXPECT_THROW(anvil_rails(args_at(kN, 1, 0)), Error);
  EXPECT_THROW(anvil_rails(args_at(-1, 1, 0)), Error);
  AnvilArgs a = args_at(0, 1, 0);
  a.rail_warmup = 0;
  EXPECT_THROW(anvil_rails(a), Error);
}

// Reference state and step for one stack. `bf` emulates the bf16 rounding points (values computed in double,
// rounded where the op rounds, rails and master in fp32); otherwise exact double math. GEMM scalars are fp32 in
// the op (as in cuBLAS), so the map coefficients are taken as floats here too.
struct RefAnvil {
  int64_t count, rows, cols;
  bool bf;
  std::vector<Mat> p, vf, vs, s;

  double R(double x) const { return bf ? static_cast<double>(round_bf16(static_cast<float>(x))) : x; }
  double F(double x) const { return bf ? static_cast<double>(static_cast<float>(x)) : x; }

  Mat gram(const Mat& x) const {
    return test::short_side_gram(x, rows, cols, [this](double v) { return R(v); });
  }

  void step(const std::vector<Mat>& grads, const AnvilArgs& a) {
    const RefRails rr = ref_rails(a.step, a.total_steps);
    const bool per_row = rows >= cols;
    const int64_t k = rows > cols ? cols : rows, stats = per_row ? rows : cols, q = per_row ? cols : rows;
    const double shape_mult = std::sqrt(std::max(1.0, static_cast<double>(rows) / cols));
    const size_t n = static_cast<size_t>(rows * cols);
    for (int64_t mi = 0; mi < count; ++mi) {
      // Rails and the Nesterov blend.
      Mat x(n);
      for (size_t e = 0; e < n; ++e) {
        const double g = grads[mi][e];
        vf[mi][e] = F(rr.fast_beta * vf[mi][e] + (1 - rr.fast_beta) * g);
        vs[mi][e] = F(0.98 * vs[mi][e] + 0.02 * g);
        const double b = rr.weight * vf[mi][e] + (1 - rr.weight) * vs[mi][e];
        x[e] = R((1 - rr.rail) * g + rr.rail * b);
      }
      // Gram normalisation: δ from the trace of the short-side Gram matrix.
      Mat A = gram(x);
      double trace = 0;
      for (int64_t i = 0; i < k; ++i) trace += A[i * k + i];
      const double delta = R(R(R(std::sqrt(R(trace))) * 1.05) + 1e-6);
      for (double& v : x) v = R(v / delta);
      const double delta_sq = R(delta * delta);
      for (double& v : A) v = R(v / delta_sq);
      // The six maps; A is recomputed from X after the first.
      for (int map = 0; map < 6; ++map) {
        if (map > 0) A = gram(x);
        test::apply_polynomial_map(x, A, rows, cols, kAnvilMaps[map], [this](double v) { return R(v); });
      }
      // Equalizer (§4.3 step 4).
      Mat r(static_cast<size_t>(stats), 0.0);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) r[per_row ? i : j] += x[i * cols + j] * x[i * cols + j] / q;
      double sum_r = 0, sum_rg2 = 0;
      Mat g(static_cast<size_t>(stats));
      for (int64_t t = 0; t < stats; ++t) {
        sum_r += r[t];
        s[mi][t] = F(0.9 * s[mi][t] + 0.1 * r[t]);
        g[t] = 1 / std::sqrt(std::max(s[mi][t], 1e-10));
        sum_rg2 += r[t] * g[t] * g[t];
      }
      const double nu = std::sqrt(q * sum_r), nu2 = std::sqrt(q * sum_rg2);
      // Update with the decay gated by the slow rail's sign.
      const double mat_mult = (a.first_matrix + mi) % 2 == 1 ? a.odd_matrix_lr_mul : 1.0;
      const double lr_eff = a.lr * shape_mult * mat_mult;
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const size_t e = static_cast<size_t>(i * cols + j);
          const double scale = R(g[per_row ? i : j] * nu / std::max(nu2, 1e-10));
          const double u = R(x[e] * scale);
          double& pe = p[mi][e];
          const double decayed = vs[mi][e] * pe >= 0 ? pe - pe * (2.25 * a.lr * lr_eff) : pe;
          pe = F(decayed - u * lr_eff);
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

std::vector<Mat> split(const std::vector<double>& flat, int64_t count, int64_t per) {
  std::vector<Mat> out(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) out[k].assign(flat.begin() + k * per, flat.begin() + (k + 1) * per);
  return out;
}

// Steps covering every rail branch: warmup, plateau with w = 1, after the switch (w = 0.4385) and the taper.
constexpr int64_t kSteps[] = {0, 1, 239, 400, 600, 1150, 1193};

void check_f64(int64_t count, int64_t rows, int64_t cols, double odd_mul, int64_t first) {
  const auto p0 = random_stack(count, rows, cols, 7, 0.05);
  Tensor p = to_tensor(p0, rows, cols, DType::f64);
  AnvilState st = AnvilState::zeros(p);
  const int64_t stats = rows >= cols ? rows : cols, per = rows * cols;
  const std::vector<Mat> zeros(count, Mat(per, 0.0));
  RefAnvil ref{count, rows, cols, false, p0, zeros, zeros, std::vector<Mat>(count, Mat(stats, 0.0))};
  int i = 0;
  for (int64_t step : kSteps) {
    const auto g = random_stack(count, rows, cols, 100 + step, 1.0 + 0.5 * i++);
    anvil_update(p, to_tensor(g, rows, cols, DType::f64), st, args_at(step, odd_mul, first));
    ref.step(g, args_at(step, odd_mul, first));
  }
  const auto pp = p.to_doubles(), ff = st.fast_rail.to_doubles(), ss = st.slow_rail.to_doubles();
  const auto sm = st.second_moment.to_doubles();
  double moved = 0;
  for (int64_t k = 0; k < count; ++k) {
    for (int64_t e = 0; e < per; ++e) {
      ASSERT_NEAR(pp[k * per + e], ref.p[k][e], 1e-13) << "matrix " << k << " element " << e;
      ASSERT_NEAR(ff[k * per + e], ref.vf[k][e], 1e-14);
      ASSERT_NEAR(ss[k * per + e], ref.vs[k][e], 1e-14);
      moved = std::max(moved, std::fabs(ref.p[k][e] - p0[k][e]));
    }
    for (int64_t t = 0; t < stats; ++t) ASSERT_NEAR(sm[k * stats + t], ref.s[k][t], 1e-12 * (1 + ref.s[k][t]));
  }
  EXPECT_GT(moved, 1e-3);
  EXPECT_FALSE(st.mantissa.defined());
}

TEST(Anvil, F64WideMatchesReference) { check_f64(3, 4, 6, 1.0, 0); }    // qk-like: XXᵀ, per-column stats
TEST(Anvil, F64SquareMatchesReference) { check_f64(2, 5, 5, 1.0, 0); }  // vo-like: per-row stats
TEST(Anvil, F64TallMatchesReference) { check_f64(4, 8, 2, 2.0, 0); }    // mlp-like: XᵀX, shape_mult 2
TEST(Anvil, F64OddMatrixMultiplierFollowsGlobalIndex) { check_f64(3, 8, 3, 2.0, 5); }

TEST(Anvil, DecayIsGatedByTheSlowRailNotTheUpdate) {
  // Two applies on the same X, P and second moment that differ only in the slow rail's sign: U is shared, so the
  // difference of the results is the decay term, on exactly the entries where each rail's sign agrees with P's.
  const int64_t rows = 4, cols = 4, per = rows * cols;
  const auto p0 = random_stack(1, rows, cols, 31, 0.5);
  const Tensor x = to_tensor(random_stack(1, rows, cols, 32, 0.3), rows, cols, DType::f64);
  const auto rail = random_stack(1, rows, cols, 33, 1.0);
  AnvilArgs a = args_at(600, 1.0, 0);
  a.lr = 0.1;  // a large decay (2.25·lr·lr_eff = 2.25%) so the gate shows
  std::vector<double> result[2];
  for (int flip = 0; flip < 2; ++flip) {
    Tensor p = to_tensor(p0, rows, cols, DType::f64);
    Tensor s = Tensor::zeros({1, rows}, DType::f64), m;
    Mat r = rail[0];
    if (flip) {
      for (double& v : r) v = -v;
    }
    anvil_apply(x, s, Tensor::from_doubles(r, {1, rows, cols}, DType::f64), p, m, a);
    result[flip] = p.to_doubles();
  }
  // Both runs share U; their difference is exactly the decay term on the entries each run gates on.
  const double decay = 2.25 * a.lr * a.lr;
  for (int64_t e = 0; e < per; ++e) {
    const double pe = p0[0][e];
    const bool on0 = rail[0][e] * pe >= 0;
    const double want = (on0 ? -pe * decay : 0.0) - (on0 ? 0.0 : -pe * decay);
    EXPECT_NEAR(result[0][e] - result[1][e], want, 1e-15) << "element " << e;
  }
}

TEST(Anvil, ZeroGradientFromZeroStateOnlyDecaysWhereTheRailAllows) {
  // G = 0 with zero rails: X = 0, δ = 1e-6, U = 0; the slow rail is 0, so [0·P ≥ 0] decays every entry.
  const int64_t rows = 6, cols = 3;
  const auto p0 = random_stack(1, rows, cols, 11, 0.1);
  Tensor p = to_tensor(p0, rows, cols, DType::f64);
  AnvilState st = AnvilState::zeros(p);
  const AnvilArgs a = args_at(5, 1.0, 0);
  anvil_update(p, Tensor::zeros({1, rows, cols}, DType::f64), st, a);
  const double lr_eff = a.lr * std::sqrt(2.0);
  const auto pp = p.to_doubles();
  for (int64_t e = 0; e < rows * cols; ++e) EXPECT_NEAR(pp[e], p0[0][e] * (1 - 2.25 * a.lr * lr_eff), 1e-15);
}

// bf16 stack with zero-gradient matrices from zero state (a padding slot with zero weights, a gated-off layer with
// live ones) beside a live one, over the first steps: everything finite, the padding slot stays zero, the gated
// layer's weights only shrink (decay, no update). The CUDA test of the same case compares against this.
TEST(Anvil, Bf16ZeroGradientMatricesStayFinite) {
  const int64_t rows = 24, cols = 24, per = rows * cols;
  auto p0 = random_stack(3, rows, cols, 41, 0.05);
  std::fill(p0[1].begin(), p0[1].end(), 0.0);
  Tensor p = to_tensor(p0, rows, cols, DType::bf16);
  AnvilState st = AnvilState::zeros(p);
  for (int64_t step = 0; step < 3; ++step) {
    auto g = random_stack(3, rows, cols, 50 + static_cast<uint64_t>(step), 0.01);
    std::fill(g[1].begin(), g[1].end(), 0.0);
    std::fill(g[2].begin(), g[2].end(), 0.0);
    anvil_update(p, to_tensor(g, rows, cols, DType::bf16), st, args_at(step, 1.0, 0));
  }
  const std::vector<double> v = p.to_doubles(), s = st.second_moment.to_doubles();
  for (const double x : v) ASSERT_TRUE(std::isfinite(x));
  for (const double x : s) ASSERT_TRUE(std::isfinite(x));
  for (int64_t e = 0; e < per; ++e) {
    EXPECT_EQ(v[static_cast<size_t>(per + e)], 0.0);
    const double before = p0[2][static_cast<size_t>(e)], after = v[static_cast<size_t>(2 * per + e)];
    EXPECT_LE(std::abs(after), std::abs(before) * (1 + 1e-2)) << e;  // bf16 rounding of the weight itself
  }
}

// SPEEDRUN_ANVIL_TRACE=1 names the matrix of a stack whose update went non-finite (and, beside it, the widest
// normalised update); unset, an update prints nothing.
TEST(Anvil, TraceNamesTheMatrixWhoseUpdateIsNotFinite) {
  const int64_t rows = 4, cols = 4;
  auto one_update = [&] {
    auto g0 = random_stack(3, rows, cols, 31, 0.1);
    g0[1][5] = std::numeric_limits<double>::quiet_NaN();
    Tensor p = to_tensor(random_stack(3, rows, cols, 32, 0.1), rows, cols, DType::f64);
    AnvilState st = AnvilState::zeros(p);
    ::testing::internal::CaptureStderr();
    anvil_update(p, to_tensor(g0, rows, cols, DType::f64), st, args_at(5, 1.0, 7));
    return ::testing::internal::GetCapturedStderr();
  };
  ASSERT_EQ(setenv("SPEEDRUN_ANVIL_TRACE", "1", 1), 0);
  const std::string traced = one_update();
  unsetenv("SPEEDRUN_ANVIL_TRACE");
  EXPECT_NE(traced.find("anvil trace: step 5, stack 3x4x4, matrix 8: "), std::string::npos) << traced;
  EXPECT_NE(traced.find("(16 non-finite)  <-- suspect"), std::string::npos) << traced;
  EXPECT_EQ(one_update(), "");
}

// bf16 path against the reference with the same rounding points (rails, second moment and master in fp32);
// GEMM summation order differs (fp32 blocks vs double), which can flip single bf16 roundings, so the masters
// are compared within a small fraction of the update. The stored weight must be the truncated master.
void check_bf16(int64_t count, int64_t rows, int64_t cols) {
  const int64_t per = rows * cols, stats = rows >= cols ? rows : cols;
  Tensor p = to_tensor(random_stack(count, rows, cols, 21, 0.05), rows, cols, DType::bf16);
  const std::vector<Mat> start = split(p.to_doubles(), count, per);
  AnvilState st = AnvilState::zeros(p);
  ASSERT_TRUE(st.mantissa.defined());
  const std::vector<Mat> zeros(count, Mat(per, 0.0));
  RefAnvil ref{count, rows, cols, true, start, zeros, zeros, std::vector<Mat>(count, Mat(stats, 0.0))};
  for (int64_t step : {int64_t{0}, int64_t{600}, int64_t{1190}}) {
    Tensor gt = to_tensor(random_stack(count, rows, cols, 200 + step, 0.01), rows, cols, DType::bf16);
    anvil_update(p, gt, st, args_at(step, 2.0, 0));
    ref.step(split(gt.to_doubles(), count, per), args_at(step, 2.0, 0));
  }
  const bf16* pb = p.data<bf16>();
  const uint16_t* mb = st.mantissa.data<uint16_t>();
  double max_diff = 0, max_update = 0;
  for (int64_t k = 0; k < count; ++k) {
    for (int64_t e = 0; e < per; ++e) {
      const int64_t idx = k * per + e;
      const float master = join_master(pb[idx], mb[idx]);
      max_diff = std::max(max_diff, std::fabs(master - ref.p[k][e]));
      max_update = std::max(max_update, std::fabs(ref.p[k][e] - start[k][e]));
      EXPECT_EQ(pb[idx].bits, static_cast<uint16_t>(std::bit_cast<uint32_t>(master) >> 16));
    }
  }
  EXPECT_GT(max_update, 0.0);
  EXPECT_LT(max_diff, 0.05 * max_update) << "max |master − reference| " << max_diff << " vs update " << max_update;
}

TEST(Anvil, Bf16WideMatchesRoundedReference) { check_bf16(2, 16, 32); }
TEST(Anvil, Bf16TallMatchesRoundedReference) { check_bf16(2, 48, 12); }

TEST(Anvil, Bf16UpdateIsTheFp32MasterComputationTruncated) {
  // The elementwise update on a bf16 weight with mantissa equals the same update on the fp32 master (an f32
  // param), truncated, when U is exact in bf16: X holds small integers times a power of two on a square matrix
  // whose equalizer scale is 1 (every row has the same sum of squares and S starts at that value).
  const int64_t rows = 4, cols = 4;
  std::vector<double> xv = {1, -1, 1, -1, -1, 1, 1, -1, 1, 1, -1, -1, -1, -1, -1, -1};
  for (double& v : xv) v = std::ldexp(v, -3);
  std::mt19937 rng(5);
  std::vector<float> masters(16);
  std::vector<double> rail(16);
  for (int e = 0; e < 16; ++e) {
    masters[e] = std::ldexp(static_cast<float>(static_cast<int>(rng() % 2001) - 1000), -12) + 1e-7f * e;
    rail[e] = (rng() % 2) ? 1.0 : -1.0;
  }
  Tensor p_bf = Tensor::zeros({1, rows, cols}, DType::bf16), mant = Tensor::zeros({1, rows, cols}, DType::u16);
  Tensor p_f32 = Tensor::zeros({1, rows, cols}, DType::f32);
  for (int e = 0; e < 16; ++e) {
    split_master(masters[e], p_bf.data<bf16>()[e], mant.data<uint16_t>()[e]);
    p_f32.data<float>()[e] = masters[e];
  }
  const double r0 = 4 * std::ldexp(1.0, -6) / 4;  // mean of X² per row
  Tensor s_bf = Tensor::from_doubles(std::vector<double>(4, r0), {1, rows}, DType::f32);
  Tensor s_f32 = s_bf.clone();
  const Tensor rail_t = Tensor::from_doubles(rail, {1, rows, cols}, DType::f32);
  Tensor none;
  AnvilArgs a = args_at(700, 1.0, 0);
  a.lr = 0.05;
  anvil_apply(Tensor::from_doubles(xv, {1, rows, cols}, DType::bf16), s_bf, rail_t, p_bf, mant, a);
  anvil_apply(Tensor::from_doubles(xv, {1, rows, cols}, DType::f32), s_f32, rail_t, p_f32, none, a);
  for (int e = 0; e < 16; ++e) {
    const float want = p_f32.data<float>()[e];
    EXPECT_EQ(std::bit_cast<uint32_t>(join_master(p_bf.data<bf16>()[e], mant.data<uint16_t>()[e])),
              std::bit_cast<uint32_t>(want))
        << "element " << e;
    EXPECT_EQ(p_bf.data<bf16>()[e].bits, static_cast<uint16_t>(std::bit_cast<uint32_t>(want) >> 16));
    EXPECT_NE(want, masters[e]);
  }
}

TEST(Anvil, MantissaAccumulatesUpdatesBelowHalfAnUlp) {
  // Weight 1.0 (bf16 spacing 2^-7 above 1); updates of ~2^-12 vanish in a plain bf16 store but the master keeps
  // them, and after enough steps the weight itself moves (as NorMuon's).
  Tensor p = Tensor::from_doubles(std::vector<double>{1, 1, 1, 1}, {1, 2, 2}, DType::bf16);
  AnvilState st = AnvilState::zeros(p);
  const Tensor g = Tensor::from_doubles(std::vector<double>{-1, 0, 0, -1}, {1, 2, 2}, DType::bf16);
  AnvilArgs a = args_at(300, 1.0, 0);
  a.weight_decay = 0.0;
  a.lr = std::ldexp(1.0, -12);
  anvil_update(p, g, st, a);
  EXPECT_EQ(p.data<bf16>()[0].bits, bf16(1.0f).bits);  // the weight did not move yet...
  EXPECT_NE(st.mantissa.data<uint16_t>()[0], 0);       // ...but the master did
  for (int i = 0; i < 80; ++i) anvil_update(p, g, st, a);
  EXPECT_GT(static_cast<float>(p.data<bf16>()[0]), 1.0f);
  EXPECT_EQ(p.data<bf16>()[1].bits, bf16(1.0f).bits);  // off-diagonal U = 0 there
}

TEST(Anvil, StateZerosAndReset) {
  Tensor p = Tensor::zeros({3, 8, 4}, DType::bf16);
  AnvilState st = AnvilState::zeros(p);
  EXPECT_EQ(st.fast_rail.shape(), (Shape{3, 8, 4}));
  EXPECT_EQ(st.slow_rail.dtype(), DType::f32);
  EXPECT_EQ(st.second_moment.shape(), (Shape{3, 8}));
  EXPECT_EQ(AnvilState::zeros(Tensor::zeros({2, 3, 5}, DType::f64)).second_moment.shape(), (Shape{2, 5}));
  anvil_update(p, to_tensor(random_stack(3, 8, 4, 1, 1.0), 8, 4, DType::bf16), st, args_at(3, 2.0, 0));
  st.zero_();
  for (const Tensor* t : {&st.fast_rail, &st.slow_rail, &st.second_moment}) {
    for (double v : t->to_doubles()) ASSERT_EQ(v, 0.0);
  }
  for (int64_t i = 0; i < st.mantissa.numel(); ++i) ASSERT_EQ(st.mantissa.data<uint16_t>()[i], 0);
}

TEST(Anvil, ShapeErrors) {
  Tensor p = Tensor::zeros({2, 4, 4}, DType::bf16);
  AnvilState st = AnvilState::zeros(p);
  EXPECT_THROW(anvil_update(p, Tensor::zeros({2, 4, 5}, DType::bf16), st, args_at(0, 1, 0)), Error);
  EXPECT_THROW(anvil_update(p, Tensor::zeros({2, 4, 4}, DType::f32), st, args_at(0, 1, 0)), Error);
  EXPECT_THROW(AnvilState::zeros(Tensor::zeros({16}, DType::bf16)), Error);
  AnvilState wrong = AnvilState::zeros(Tensor::zeros({2, 4, 4}, DType::f32));
  EXPECT_THROW(anvil_update(p, Tensor::zeros({2, 4, 4}, DType::bf16), wrong, args_at(0, 1, 0)), Error);
}

}  // namespace
}  // namespace gpt
