#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/bigram.h"
#include "kernels/smear.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

Tensor ids_tensor(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}
Tensor scalar(double v, DType dtype = DType::f64) { return Tensor::from_doubles(std::vector<double>{v}, {1}, dtype); }

TEST(Smear, ForwardMatchesHandComputedValues) {
  // d = 13; e_t = (t+1) in column 0, 1 elsewhere; w = (0.5, 0, ...): z_t = 0.5·(t+1), λ = 2.
  const int64_t rows = 3, d = 13;
  std::vector<double> ev(rows * d, 1.0);
  for (int t = 0; t < rows; ++t) ev[t * d] = t + 1;
  Tensor e = Tensor::from_doubles(ev, {rows, d}, DType::f64);
  std::vector<double> wv(12, 0.0);
  wv[0] = 0.5;
  Tensor w = Tensor::from_doubles(wv, {1, 12}, DType::f64);
  Tensor out = Tensor::empty({rows, d}, DType::f64);
  Tensor sig = Tensor::empty({rows}, DType::f64);
  smear_forward(e, w, scalar(2.0), out, sig);
  const auto o = out.to_doubles();
  auto sigm = [](double z) { return 1 / (1 + std::exp(-z)); };
  EXPECT_EQ(o[0], 1.0);  // row 0 unchanged
  EXPECT_EQ(o[5], 1.0);
  EXPECT_NEAR(o[d], 2 + 2 * sigm(1.0) * 1, 1e-15);
  EXPECT_NEAR(o[d + 7], 1 + 2 * sigm(1.0) * 1, 1e-15);
  EXPECT_NEAR(o[2 * d], 3 + 2 * sigm(1.5) * 2, 1e-15);
  EXPECT_NEAR(sig.to_doubles()[2], sigm(1.5), 1e-15);
}

TEST(Smear, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 5, d = 14;
  Tensor e = random_tensor({rows, d}, DType::f64, 1);
  Tensor w = random_tensor({1, 12}, DType::f64, 2, 0.5);
  Tensor lambda = scalar(0.8);
  const Tensor up = random_tensor({rows, d}, DType::f64, 3);
  Tensor out = Tensor::empty({rows, d}, DType::f64);
  Tensor sig = Tensor::empty({rows}, DType::f64);
  auto loss = [&] {
    smear_forward(e, w, lambda, out, sig);
    return testing::dot(out, up);
  };
  loss();
  Tensor de = Tensor::zeros({rows, d}, DType::f64), dw = Tensor::zeros({1, 12}, DType::f64), dl = scalar(0.0);
  smear_backward(up, e, w, lambda, sig, de, dw, dl);
  EXPECT_LT(testing::max_relative_error(de.to_doubles(), testing::numeric_gradient(loss, e)), 1e-8);
  EXPECT_LT(testing::max_relative_error(dw.to_doubles(), testing::numeric_gradient(loss, w)), 1e-8);
  EXPECT_LT(testing::max_relative_error(dl.to_doubles(), testing::numeric_gradient(loss, lambda)), 1e-8);
}

TEST(Smear, Bf16AgreesWithF64WithinBf16Tolerance) {
  const int64_t rows = 16, d = 32;
  Tensor e = random_tensor({rows, d}, DType::f64, 4);
  Tensor w = random_tensor({1, 12}, DType::f64, 5, 0.3);
  Tensor out64 = Tensor::empty({rows, d}, DType::f64), sig64 = Tensor::empty({rows}, DType::f64);
  smear_forward(e, w, scalar(0.7), out64, sig64);
  Tensor eb = e.to(DType::bf16), wb = w.to(DType::bf16);
  Tensor outb = Tensor::empty({rows, d}, DType::bf16), sigb = Tensor::empty({rows}, DType::f32);
  smear_forward(eb, wb, scalar(0.7, DType::f32), outb, sigb);
  EXPECT_LT(testing::max_relative_error(outb.to_doubles(), out64.to_doubles()), 2e-2);
}

TEST(Smear, RejectsNarrowInputAndAliasing) {
  Tensor e = Tensor::zeros({4, 8}, DType::f32);
  Tensor w = Tensor::zeros({1, 12}, DType::f32);
  Tensor out = Tensor::zeros({4, 8}, DType::f32), sig = Tensor::zeros({4}, DType::f32);
  EXPECT_THROW(smear_forward(e, w, scalar(1.0, DType::f32), out, sig), Error);
  Tensor wide = Tensor::zeros({4, 16}, DType::f32);
  EXPECT_THROW(smear_forward(wide, w, scalar(1.0, DType::f32), wide, sig), Error);
}

TEST(Bigram, ForwardMultipliesRowBySignRow) {
  Tensor embed = Tensor::from_doubles(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}, DType::bf16);
  Tensor sign = Tensor::from_doubles(std::vector<double>{1, -1, -1, 1}, {2, 2}, DType::bf16);
  Tensor out = Tensor::empty({3, 2}, DType::bf16);
  bigram_forward(embed, sign, ids_tensor({2, 0, 2}), ids_tensor({0, 1, 1}), out);
  EXPECT_EQ(out.to_doubles(), (std::vector<double>{5, -6, -1, 2, -5, 6}));
}

TEST(Bigram, BackwardMatchesFiniteDifferences) {
  Tensor embed = random_tensor({5, 3}, DType::f64, 6);
  std::vector<double> signs = {1, -1, 1, -1, -1, 1, 1, 1, -1};
  Tensor sign = Tensor::from_doubles(signs, {3, 3}, DType::f64);
  Tensor ids = ids_tensor({4, 1, 4, 0, 4}), sids = ids_tensor({2, 0, 1, 1, 0});
  const Tensor up = random_tensor({5, 3}, DType::f64, 7);
  Tensor out = Tensor::empty({5, 3}, DType::f64);
  auto loss = [&] {
    bigram_forward(embed, sign, ids, sids, out);
    return testing::dot(out, up);
  };
  const auto expected = testing::numeric_gradient(loss, embed);
  Tensor dembed = Tensor::zeros({5, 3}, DType::f64);
  bigram_backward(up, sign, ids, sids, dembed);
  EXPECT_LT(testing::max_relative_error(dembed.to_doubles(), expected), 1e-8);
}

TEST(Bigram, RejectsOutOfRangeSignRow) {
  Tensor embed = Tensor::zeros({3, 2}, DType::f32), sign = Tensor::zeros({2, 2}, DType::f32);
  Tensor out = Tensor::empty({1, 2}, DType::f32);
  EXPECT_THROW(bigram_forward(embed, sign, ids_tensor({0}), ids_tensor({2}), out), Error);
  EXPECT_THROW(bigram_forward(embed, sign, ids_tensor({3}), ids_tensor({0}), out), Error);
}

}  // namespace
}  // namespace gpt
