#include "kernels/dc_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/attention/attention_test_util.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using attention_test::cu_tensor;
using attention_test::segment_ids;
using testing::random_tensor;

constexpr int64_t kG = 16;                   // lanes in the gate tensor
constexpr DcLanes kLanes{.w1 = 3, .w2 = 9};  // w1 lanes [3, 3+H), w2 lanes [9, 9+H) (H <= 6)

// The DC correction written out directly in doubles: per query, per head softmax over the local keys,
// the normalized mixing weights, then the weighted sum of values.
std::vector<double> dc_reference(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int32_t>& cu,
                                 const Tensor& gates, const Tensor& y_core, double scale, int64_t keys) {
  const int64_t T = q.size(0), H = q.size(1), D = q.size(2);
  const auto Q = q.to_doubles(), K = k.to_doubles(), V = v.to_doubles(), P = gates.to_doubles();
  std::vector<double> y = y_core.to_doubles();
  const std::vector<int> seg = segment_ids(cu, T);
  for (int64_t t = 0; t < T; ++t) {
    double ms = 0;
    for (int64_t h = 0; h < H; ++h) ms += P[t * kG + kLanes.w1 + h] * P[t * kG + kLanes.w1 + h] / H;
    std::vector<double> mix(static_cast<size_t>(T), 0.0);
    for (int64_t h = 0; h < H; ++h) {
      const double w1 = P[t * kG + kLanes.w1 + h] / std::sqrt(ms + 1e-6);
      std::vector<double> e(static_cast<size_t>(T), 0.0);
      double sum = 0;
      for (int64_t s = 0; s < T; ++s) {
        if (seg[s] != seg[t] || t - s < 0 || t - s >= keys) continue;
        double z = 0;
        for (int64_t d = 0; d < D; ++d) z += Q[(t * H + h) * D + d] * K[(s * H + h) * D + d];
        sum += (e[s] = std::exp(scale * z));
      }
      for (int64_t s = 0; s < T; ++s) mix[s] += w1 * e[s] / sum;
    }
    for (int64_t g = 0; g < H; ++g) {
      for (int64_t s = 0; s < T; ++s) {
        for (int64_t d = 0; d < D; ++d) {
          y[(t * H + g) * D + d] += P[t * kG + kLanes.w2 + g] * mix[s] * V[(s * H + g) * D + d];
        }
      }
    }
  }
  return y;
}

struct DcCase {
  int64_t T, H, D;
  std::vector<int32_t> cu;
  int64_t keys;
};
const std::vector<DcCase>& dc_cases() {
  static const std::vector<DcCase> all = {
      {18, 3, 8, {0, 1, 9, 9, 18, 18}, 4},    // keys shorter than the segments
      {18, 3, 8, {0, 1, 9, 9, 18, 18}, 112},  // the recipe's 112: whole segments
      {12, 2, 4, {0, 5, 12, 12, 12}, 1},      // only the token itself
      {24, 6, 8, {0, 7, 8, 24}, 5},
  };
  return all;
}

struct DcInputs {
  Tensor q, k, v, gates, y_core;
};
DcInputs make_inputs(const DcCase& c, DType dtype, uint64_t seed) {
  const Shape shape{c.T, c.H, c.D};
  return {random_tensor(shape, dtype, seed), random_tensor(shape, dtype, seed + 1),
          random_tensor(shape, dtype, seed + 2), random_tensor({c.T, kG}, dtype, seed + 3),
          random_tensor(shape, dtype, seed + 4)};
}

struct DcOutputs {
  Tensor y, lse;
};
DcOutputs run_dc(const DcInputs& in, const Tensor& cu, float scale, int64_t keys) {
  DcOutputs o{Tensor::empty(in.q.shape(), in.q.dtype()),
              Tensor::empty({in.q.size(1), in.q.size(0)}, stat_dtype(in.q.dtype()))};
  dc_attention_forward(in.q, in.k, in.v, cu, in.gates, kLanes, in.y_core, o.y, o.lse, scale, keys);
  return o;
}

TEST(DcAttention, ForwardMatchesDirectFormula) {
  uint64_t seed = 1;
  for (const DcCase& c : dc_cases()) {
    const DcInputs in = make_inputs(c, DType::f64, seed += 10);
    const DcOutputs o = run_dc(in, cu_tensor(c.cu), 0.375f, c.keys);  // exact in fp32 and f64
    const auto want = dc_reference(in.q, in.k, in.v, c.cu, in.gates, in.y_core, 0.375, c.keys);
    EXPECT_LT(testing::max_relative_error(o.y.to_doubles(), want), 1e-13) << "T=" << c.T << " keys=" << c.keys;
  }
}

TEST(DcAttention, ZeroW2LeavesCoreOutputUnchanged) {
  const DcCase& c = dc_cases()[0];
  DcInputs in = make_inputs(c, DType::bf16, 50);
  std::vector<double> gates = in.gates.to_doubles();
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t g = 0; g < c.H; ++g) gates[t * kG + kLanes.w2 + g] = 0.0;  // the recipe's init
  in.gates = Tensor::from_doubles(gates, in.gates.shape(), DType::bf16);
  const DcOutputs o = run_dc(in, cu_tensor(c.cu), 0.4f, c.keys);
  EXPECT_EQ(o.y.to_doubles(), in.y_core.to_doubles());
}

TEST(DcAttention, InPlaceOnCoreOutput) {
  const DcCase& c = dc_cases()[3];
  DcInputs in = make_inputs(c, DType::f32, 60);
  const DcOutputs o = run_dc(in, cu_tensor(c.cu), 0.3f, c.keys);
  Tensor lse = Tensor::empty({c.H, c.T}, DType::f32);
  dc_attention_forward(in.q, in.k, in.v, cu_tensor(c.cu), in.gates, kLanes, in.y_core, in.y_core, lse, 0.3f, c.keys);
  EXPECT_EQ(in.y_core.to_doubles(), o.y.to_doubles());
}

TEST(DcAttention, BackwardMatchesFiniteDifferencesAndAccumulates) {
  uint64_t seed = 100;
  for (const DcCase& c : dc_cases()) {
    if (c.T * c.H * c.D > 600) continue;  // keep central differences cheap
    DcInputs in = make_inputs(c, DType::f64, seed += 10);
    const Tensor w = random_tensor(in.q.shape(), DType::f64, seed + 7);
    const Tensor cu = cu_tensor(c.cu);
    const float scale = 0.5f;
    auto loss = [&] { return testing::dot(run_dc(in, cu, scale, c.keys).y, w); };
    const std::vector<std::vector<double>> numeric = {
        testing::numeric_gradient(loss, in.q), testing::numeric_gradient(loss, in.k),
        testing::numeric_gradient(loss, in.v), testing::numeric_gradient(loss, in.gates)};
    const DcOutputs o = run_dc(in, cu, scale, c.keys);
    Tensor grads[4] = {random_tensor(in.q.shape(), DType::f64, 1), random_tensor(in.q.shape(), DType::f64, 2),
                       random_tensor(in.q.shape(), DType::f64, 3), random_tensor(in.gates.shape(), DType::f64, 4)};
    std::vector<double> base[4];
    for (int i = 0; i < 4; ++i) base[i] = grads[i].to_doubles();
    dc_attention_backward(w, in.q, in.k, in.v, cu, in.gates, kLanes, o.lse, grads[0], grads[1], grads[2], grads[3],
                          scale, c.keys);
    const char* names[4] = {"dq", "dk", "dv", "dgates"};
    for (int i = 0; i < 4; ++i) {
      auto got = grads[i].to_doubles();
      for (size_t j = 0; j < got.size(); ++j) got[j] -= base[i][j];
      EXPECT_LT(testing::max_relative_error(got, numeric[i]), 1e-7) << names[i] << " T=" << c.T << " keys=" << c.keys;
    }
  }
}

TEST(DcAttention, Bf16AgreesWithF64) {
  const DcCase& c = dc_cases()[3];
  const Tensor cu = cu_tensor(c.cu);
  const DcInputs lo = make_inputs(c, DType::bf16, 200);
  const DcInputs hi{lo.q.to(DType::f64), lo.k.to(DType::f64), lo.v.to(DType::f64), lo.gates.to(DType::f64),
                    lo.y_core.to(DType::f64)};
  const DcOutputs oh = run_dc(hi, cu, 0.3f, c.keys), ol = run_dc(lo, cu, 0.3f, c.keys);
  EXPECT_LT(testing::max_relative_error(ol.y.to_doubles(), oh.y.to_doubles()), 1e-2);
  const Tensor g = random_tensor(lo.q.shape(), DType::bf16, 210);
  Tensor h[4] = {Tensor::zeros(lo.q.shape(), DType::f64), Tensor::zeros(lo.q.shape(), DType::f64),
                 Tensor::zeros(lo.q.shape(), DType::f64), Tensor::zeros(lo.gates.shape(), DType::f64)};
  Tensor l[4] = {Tensor::zeros(lo.q.shape(), DType::bf16), Tensor::zeros(lo.q.shape(), DType::bf16),
                 Tensor::zeros(lo.q.shape(), DType::bf16), Tensor::zeros(lo.gates.shape(), DType::bf16)};
  dc_attention_backward(g.to(DType::f64), hi.q, hi.k, hi.v, cu, hi.gates, kLanes, oh.lse, h[0], h[1], h[2], h[3], 0.3f,
                        c.keys);
  dc_attention_backward(g, lo.q, lo.k, lo.v, cu, lo.gates, kLanes, ol.lse, l[0], l[1], l[2], l[3], 0.3f, c.keys);
  for (int i = 0; i < 4; ++i) {
    EXPECT_LT(testing::max_relative_error(l[i].to_doubles(), h[i].to_doubles()), 3e-2) << "grad " << i;
  }
}

TEST(DcAttention, Bf16RoundsMixingAndPerKeyWeights) {
  // One token, one key: π = 1, so a = Σ_h w1_h and the correction of head g is bf16(w2_g · a) · v_g with
  // w1_h = bf16(r_h · ρ). Emulated here in fp32 with explicit roundings.
  const int64_t H = 3, D = 4;
  const Tensor q = random_tensor({1, H, D}, DType::bf16, 300), k = random_tensor({1, H, D}, DType::bf16, 301);
  const Tensor v = random_tensor({1, H, D}, DType::bf16, 302), gates = random_tensor({1, kG}, DType::bf16, 303);
  const Tensor y_core = Tensor::zeros({1, H, D}, DType::bf16);
  Tensor y = Tensor::empty({1, H, D}, DType::bf16), lse = Tensor::empty({H, 1}, DType::f32);
  dc_attention_forward(q, k, v, cu_tensor({0, 1}), gates, kLanes, y_core, y, lse, 0.1f);
  const auto P = gates.to_doubles(), V = v.to_doubles(), Y = y.to_doubles();
  float ss = 0;
  for (int64_t h = 0; h < H; ++h) ss += static_cast<float>(P[kLanes.w1 + h] * P[kLanes.w1 + h]);
  const float rho = 1.0f / std::sqrt(ss / H + 1e-6f);
  float a = 0;
  for (int64_t h = 0; h < H; ++h) a += round_bf16(static_cast<float>(P[kLanes.w1 + h]) * rho);
  for (int64_t g = 0; g < H; ++g) {
    const float c = round_bf16(static_cast<float>(P[kLanes.w2 + g]) * a);
    for (int64_t d = 0; d < D; ++d) EXPECT_EQ(Y[g * D + d], round_bf16(c * static_cast<float>(V[g * D + d])));
  }
}

TEST(DcAttention, RejectsBadArguments) {
  const Tensor q = Tensor::zeros({4, 2, 4}, DType::f32), cu = cu_tensor({0, 4});
  Tensor y = Tensor::zeros({4, 2, 4}, DType::f32), lse = Tensor::zeros({2, 4}, DType::f32);
  EXPECT_THROW(dc_attention_forward(q, q, q, cu, Tensor::zeros({4, 10}, DType::f32), kLanes, q, y, lse, 0.1f), Error);
  EXPECT_THROW(dc_attention_forward(q, q, q, cu, Tensor::zeros({4, kG}, DType::f32), kLanes, q, y, lse, 0.1f, 0),
               Error);
  EXPECT_THROW(
      dc_attention_forward(q, q, q, cu_tensor({0, 3}), Tensor::zeros({4, kG}, DType::f32), kLanes, q, y, lse, 0.1f),
      Error);
  EXPECT_NO_THROW(dc_attention_forward(q, q, q, cu, Tensor::zeros({4, kG}, DType::f32), kLanes, q, y, lse, 0.1f));
}

}  // namespace
}  // namespace gpt
