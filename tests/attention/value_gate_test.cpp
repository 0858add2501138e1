#include "kernels/value_gate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/attention/attention_test_util.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

// Model-like small shapes: H = 6 heads, Dh = 4 (so ve_t[0:6] spans heads 0 and 1), u wider than 6.
constexpr int64_t T = 5, H = 6, Dh = 4, C = 10;

std::vector<double> reference(const Tensor& v, const Tensor& u, const Tensor& ve, const Tensor& gate) {
  const auto V = v.to_doubles(), U = u.to_doubles(), E = ve.to_doubles(), W = gate.to_doubles();
  std::vector<double> out = V;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      double z = 0;
      for (int j = 0; j < 6; ++j) z += W[h * 12 + j] * U[t * C + j] + W[h * 12 + 6 + j] * E[t * H * Dh + j];
      const double g = 2.0 / (1.0 + std::exp(-z));
      for (int64_t d = 0; d < Dh; ++d) out[(t * H + h) * Dh + d] += g * E[(t * H + h) * Dh + d];
    }
  }
  return out;
}

TEST(ValueGate, ForwardMatchesFormula) {
  const Tensor v = random_tensor({T, H, Dh}, DType::f64, 1), u = random_tensor({T, C}, DType::f64, 2);
  const Tensor ve = random_tensor({T, H, Dh}, DType::f64, 3), gate = random_tensor({H, 12}, DType::f64, 4);
  Tensor out = Tensor::empty(v.shape(), DType::f64);
  value_gate_forward(v, u, ve, gate, out);
  EXPECT_LT(testing::max_relative_error(out.to_doubles(), reference(v, u, ve, gate)), 1e-14);
}

TEST(ValueGate, ZeroGateInjectsValueEmbeddingOnce) {
  // The recipe initializes ve_gate_bank to 0: 2σ(0) = 1, so v_out = v + ve exactly.
  const Tensor v = random_tensor({T, H, Dh}, DType::f64, 5), u = random_tensor({T, C}, DType::f64, 6);
  const Tensor ve = random_tensor({T, H, Dh}, DType::f64, 7);
  Tensor out = Tensor::empty(v.shape(), DType::f64);
  value_gate_forward(v, u, ve, Tensor::zeros({H, 12}, DType::f64), out);
  const auto O = out.to_doubles(), V = v.to_doubles(), E = ve.to_doubles();
  for (size_t i = 0; i < O.size(); ++i) EXPECT_DOUBLE_EQ(O[i], V[i] + E[i]);
}

TEST(ValueGate, BackwardMatchesFiniteDifferencesAndAccumulates) {
  Tensor v = random_tensor({T, H, Dh}, DType::f64, 8), u = random_tensor({T, C}, DType::f64, 9);
  Tensor ve = random_tensor({T, H, Dh}, DType::f64, 10), gate = random_tensor({H, 12}, DType::f64, 11, 0.5);
  const Tensor w = random_tensor({T, H, Dh}, DType::f64, 12);
  Tensor out = Tensor::empty(v.shape(), DType::f64);
  auto loss = [&] {
    value_gate_forward(v, u, ve, gate, out);
    return testing::dot(out, w);
  };
  const std::vector<std::vector<double>> numeric = {
      testing::numeric_gradient(loss, v), testing::numeric_gradient(loss, u), testing::numeric_gradient(loss, ve),
      testing::numeric_gradient(loss, gate)};
  Tensor grads[4] = {random_tensor(v.shape(), DType::f64, 13), random_tensor(u.shape(), DType::f64, 14),
                     random_tensor(ve.shape(), DType::f64, 15), random_tensor(gate.shape(), DType::f64, 16)};
  std::vector<double> base[4];
  for (int i = 0; i < 4; ++i) base[i] = grads[i].to_doubles();
  value_gate_backward(w, u, ve, gate, grads[0], grads[1], grads[2], grads[3]);
  const char* names[4] = {"dv", "du", "dve", "dgate"};
  for (int i = 0; i < 4; ++i) {
    auto got = grads[i].to_doubles();
    for (size_t j = 0; j < got.size(); ++j) got[j] -= base[i][j];
    EXPECT_LT(testing::max_relative_error(got, numeric[i]), 1e-8) << names[i];
  }
}

// write_dv / write_dve = overwrite: written over NaN (every element, the gate lanes of ve too) with what adding into
// zeros gives; du and dgate still add.
TEST(ValueGate, OverwrittenGradientsEqualAddingIntoZeros) {
  const Tensor u = random_tensor({T, C}, DType::bf16, 50), ve = random_tensor({T, H, Dh}, DType::bf16, 51);
  const Tensor gate = random_tensor({H, 12}, DType::bf16, 52, 0.5), w = random_tensor({T, H, Dh}, DType::bf16, 53);
  const Tensor du0 = random_tensor(u.shape(), DType::bf16, 54), dgate0 = random_tensor(gate.shape(), DType::bf16, 55);
  Tensor want[4] = {Tensor::zeros(ve.shape(), DType::bf16), du0.clone(), Tensor::zeros(ve.shape(), DType::bf16),
                    dgate0.clone()};
  value_gate_backward(w, u, ve, gate, want[0], want[1], want[2], want[3]);
  const std::vector<double> nan(static_cast<size_t>(ve.numel()), std::nan(""));
  Tensor got[4] = {Tensor::from_doubles(nan, ve.shape(), DType::bf16), du0.clone(),
                   Tensor::from_doubles(nan, ve.shape(), DType::bf16), dgate0.clone()};
  value_gate_backward(w, u, ve, gate, got[0], got[1], got[2], got[3], GradWrite::overwrite, GradWrite::overwrite);
  const char* names[4] = {"dv", "du", "dve", "dgate"};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i].to_doubles(), want[i].to_doubles()) << names[i];
}

TEST(ValueGate, Bf16AgreesWithF64) {
  const auto v = attention_test::twin_random({T, H, Dh}, DType::bf16, 20);
  const auto u = attention_test::twin_random({T, C}, DType::bf16, 21);
  const auto ve = attention_test::twin_random({T, H, Dh}, DType::bf16, 22);
  const auto gate = attention_test::twin_random({H, 12}, DType::bf16, 23, 0.5);
  const auto g = attention_test::twin_random({T, H, Dh}, DType::bf16, 24);
  Tensor oh = Tensor::empty(v.exact.shape(), DType::f64), ol = Tensor::empty(v.exact.shape(), DType::bf16);
  value_gate_forward(v.exact, u.exact, ve.exact, gate.exact, oh);
  value_gate_forward(v.low, u.low, ve.low, gate.low, ol);
  EXPECT_LT(testing::max_relative_error(ol.to_doubles(), oh.to_doubles()), 1e-2);
  const Shape shapes[4] = {v.exact.shape(), u.exact.shape(), ve.exact.shape(), gate.exact.shape()};
  Tensor h[4], l[4];
  for (int i = 0; i < 4; ++i) {
    h[i] = Tensor::zeros(shapes[i], DType::f64);
    l[i] = Tensor::zeros(shapes[i], DType::bf16);
  }
  value_gate_backward(g.exact, u.exact, ve.exact, gate.exact, h[0], h[1], h[2], h[3]);
  value_gate_backward(g.low, u.low, ve.low, gate.low, l[0], l[1], l[2], l[3]);
  for (int i = 0; i < 4; ++i) {
    EXPECT_LT(testing::max_relative_error(l[i].to_doubles(), h[i].to_doubles()), 1e-2) << "grad " << i;
  }
}

TEST(ValueGate, RejectsBadShapes) {
  const Tensor v = Tensor::zeros({T, H, Dh}, DType::f32);
  Tensor out = Tensor::zeros({T, H, Dh}, DType::f32);
  const Tensor u = Tensor::zeros({T, C}, DType::f32);
  EXPECT_THROW(value_gate_forward(v, u, v, Tensor::zeros({H, 6}, DType::f32), out), Error);
  EXPECT_THROW(value_gate_forward(v, Tensor::zeros({T, 5}, DType::f32), v, Tensor::zeros({H, 12}, DType::f32), out),
               Error);
  EXPECT_THROW(value_gate_forward(v, u, v, Tensor::zeros({H, 12}, DType::bf16), out), Error);
  Tensor g = Tensor::zeros({T, H, Dh}, DType::f32), du = Tensor::zeros({T, C}, DType::f32),
         dve = Tensor::zeros({T, H, Dh}, DType::f32), dgate = Tensor::zeros({H, 12}, DType::f32);
  EXPECT_THROW(value_gate_backward(g, u, v, Tensor::zeros({H, 12}, DType::f32), g, du, dve, dgate), Error);
}

}  // namespace
}  // namespace gpt
