#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

Tensor scalar(double v, DType dtype = DType::f64) { return Tensor::from_doubles(std::vector<double>{v}, {1}, dtype); }

TEST(Mix, ForwardMatchesHandComputedResidualMix) {
  // x ← ρ·x + π·a + g0_t·x0 + gb_t·Bg with lanes 0 (g0) and 1 (gb) of a [2, 3] gate output.
  Tensor x = Tensor::from_doubles(std::vector<double>{1, 2, 3, 4}, {2, 2}, DType::f64);
  Tensor a = Tensor::from_doubles(std::vector<double>{10, 20, 30, 40}, {2, 2}, DType::f64);
  Tensor x0 = Tensor::from_doubles(std::vector<double>{1, 1, 2, 2}, {2, 2}, DType::f64);
  Tensor bg = Tensor::from_doubles(std::vector<double>{5, 6, 7, 8}, {2, 2}, DType::f64);
  Tensor gate = Tensor::from_doubles(std::vector<double>{0.5, -1, 9, 2, 0.25, 9}, {2, 3}, DType::f64);
  Tensor out = Tensor::empty({2, 2}, DType::f64);
  const std::vector<MixTerm> terms = {{x, Coef::of_scalar(scalar(0.5))},
                                      {a, Coef::of_scalar(scalar(2.0))},
                                      {x0, Coef::of_lane(gate, 0)},
                                      {bg, Coef::of_lane(gate, 1)}};
  mix_forward(terms, out);
  // row 0: 0.5·x + 2·a + 0.5·x0 − 1·bg; row 1: 0.5·x + 2·a + 2·x0 + 0.25·bg
  EXPECT_EQ(out.to_doubles(),
            (std::vector<double>{0.5 + 20 + 0.5 - 5, 1 + 40 + 0.5 - 6, 1.5 + 60 + 4 + 1.75, 2 + 80 + 4 + 2}));
}

TEST(Mix, GroupsOffsetAndSigmoidScalar) {
  // out = σ(0)·(1 + G[t, 1 + block])·x with two column blocks of 2.
  Tensor x = Tensor::from_doubles(std::vector<double>{1, 2, 3, 4}, {1, 4}, DType::f64);
  Tensor gate = Tensor::from_doubles(std::vector<double>{7, 1, 3}, {1, 3}, DType::f64);
  Tensor out = Tensor::empty({1, 4}, DType::f64);
  const MixTerm term{x, Coef::sigmoid_scalar(scalar(0.0)).times_lane(gate, 1, 2).plus(1.0f)};
  mix_forward({&term, 1}, out);
  EXPECT_EQ(out.to_doubles(), (std::vector<double>{0.5 * 2 * 1, 0.5 * 2 * 2, 0.5 * 4 * 3, 0.5 * 4 * 4}));
}

TEST(Mix, Bf16RoundsFp32ScalarFirst) {
  // bf16(1.0039) = 1, so 3·bf16(ρ) = 3; an unrounded ρ would give 3.0117 -> bf16 3.015625.
  Tensor x = Tensor::from_doubles(std::vector<double>{3.0}, {1, 1}, DType::bf16);
  Tensor out = Tensor::empty({1, 1}, DType::bf16);
  const MixTerm term{x, Coef::of_scalar(scalar(1.0039, DType::f32))};
  mix_forward({&term, 1}, out);
  EXPECT_EQ(out.to_doubles()[0], 3.0);
  Tensor x32 = Tensor::from_doubles(std::vector<double>{3.0}, {1, 1}, DType::f32);
  Tensor out32 = Tensor::empty({1, 1}, DType::f32);
  const MixTerm term32{x32, Coef::of_scalar(scalar(1.0039, DType::f32))};
  mix_forward({&term32, 1}, out32);
  EXPECT_FLOAT_EQ(static_cast<float>(out32.to_doubles()[0]), 3.0f * 1.0039f);
}

TEST(Mix, Bf16KeepsAnUnroundedScalarAsStored) {
  // §2.7: MUDD's fp32 factor 0.1 is not rounded to bf16 (0.10009765625). 0.1f·2.25 = 0.225000003 -> bf16
  // 0.224609375, where bf16(0.1)·2.25 = 0.2252197 -> bf16 0.2255859375.
  Tensor x = Tensor::from_doubles(std::vector<double>{2.25}, {1, 1}, DType::bf16);
  Tensor out = Tensor::empty({1, 1}, DType::bf16);
  const MixTerm unrounded{x, Coef::unrounded_scalar(scalar(0.1, DType::f32))};
  mix_forward({&unrounded, 1}, out);
  EXPECT_EQ(out.to_doubles()[0], 0.224609375);
  const MixTerm rounded{x, Coef::of_scalar(scalar(0.1, DType::f32))};
  mix_forward({&rounded, 1}, out);
  EXPECT_EQ(out.to_doubles()[0], 0.2255859375);
  // The backward scales dx by the same unrounded factor (an f32 dx shows it exactly).
  Tensor dout = Tensor::from_doubles(std::vector<double>{1.0}, {1, 1}, DType::f32);
  Tensor x32 = Tensor::from_doubles(std::vector<double>{2.25}, {1, 1}, DType::f32);
  Tensor dx = Tensor::zeros({1, 1}, DType::f32);
  const MixTerm term32{x32, Coef::unrounded_scalar(scalar(0.1, DType::f32))};
  const MixGrad grad{.dx = dx};
  mix_backward(dout, {&term32, 1}, {&grad, 1});
  EXPECT_EQ(static_cast<float>(dx.to_doubles()[0]), 0.1f);
}

TEST(Mix, Bf16SumIsRoundedOnce) {
  // 1 + 3·2^-9: rounding after each add would stay at 1 (bf16 spacing at 1 is 2^-7); one fp32 sum rounds to
  // 1 + 2^-7.
  const double e = 1.0 / 512;
  Tensor one = Tensor::from_doubles(std::vector<double>{1.0}, {1, 1}, DType::bf16);
  Tensor small = Tensor::from_doubles(std::vector<double>{e}, {1, 1}, DType::bf16);
  Tensor out = Tensor::empty({1, 1}, DType::bf16);
  const std::vector<MixTerm> terms = {
      {one, Coef::one()}, {small, Coef::one()}, {small, Coef::one()}, {small, Coef::one()}};
  mix_forward(terms, out);
  EXPECT_EQ(out.to_doubles()[0], 1.0 + 1.0 / 128);
}

TEST(Mix, InPlaceForward) {
  Tensor x = Tensor::from_doubles(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}, DType::f32);
  Tensor a = Tensor::from_doubles(std::vector<double>{1, 1, 1, 1, 1, 1}, {3, 2}, DType::f32);
  const std::vector<MixTerm> terms = {{x, Coef::of_scalar(scalar(2.0, DType::f32))}, {a, Coef::one()}};
  mix_forward(terms, x);
  EXPECT_EQ(x.to_doubles(), (std::vector<double>{3, 5, 7, 9, 11, 13}));
}

TEST(Mix, BackwardMatchesFiniteDifferencesForEveryInput) {
  const int64_t rows = 3, n = 4;
  Tensor x = random_tensor({rows, n}, DType::f64, 1);
  Tensor a = random_tensor({rows, n}, DType::f64, 2);
  Tensor x0 = random_tensor({rows, n}, DType::f64, 3);
  Tensor bg = random_tensor({rows, n}, DType::f64, 4);
  Tensor rho = scalar(0.7), pi = scalar(-1.3), skip = scalar(0.4);
  Tensor gate = random_tensor({rows, 5}, DType::f64, 5);
  const Tensor w = random_tensor({rows, n}, DType::f64, 6);
  Tensor out = Tensor::empty({rows, n}, DType::f64);
  const std::vector<MixTerm> terms = {{x, Coef::of_scalar(rho)},
                                      {a, Coef::of_scalar(pi)},
                                      {x0, Coef::of_lane(gate, 0, 2).plus(1.0f)},
                                      {bg, Coef::sigmoid_scalar(skip).times_lane(gate, 3)}};
  auto loss = [&] {
    mix_forward(terms, out);
    return testing::dot(out, w);
  };
  std::vector<Tensor> dxs;
  for (int k = 0; k < 4; ++k) dxs.push_back(Tensor::zeros({rows, n}, DType::f64));
  Tensor drho = scalar(0.0), dpi = scalar(0.0), dskip = scalar(0.0);
  Tensor dgate = Tensor::zeros({rows, 5}, DType::f64);
  const std::vector<MixGrad> grads = {{.dx = dxs[0], .dscalar = drho},
                                      {.dx = dxs[1], .dscalar = dpi},
                                      {.dx = dxs[2], .dlanes = dgate},
                                      {.dx = dxs[3], .dscalar = dskip, .dlanes = dgate}};
  loss();
  mix_backward(w, terms, grads);
  std::vector<Tensor*> inputs = {&x, &a, &x0, &bg};
  for (int k = 0; k < 4; ++k) {
    EXPECT_LT(testing::max_relative_error(dxs[k].to_doubles(), testing::numeric_gradient(loss, *inputs[k])), 1e-8)
        << "term " << k;
  }
  EXPECT_LT(testing::max_relative_error(drho.to_doubles(), testing::numeric_gradient(loss, rho)), 1e-8);
  EXPECT_LT(testing::max_relative_error(dpi.to_doubles(), testing::numeric_gradient(loss, pi)), 1e-8);
  EXPECT_LT(testing::max_relative_error(dskip.to_doubles(), testing::numeric_gradient(loss, skip)), 1e-8);
  const auto expected_dgate = testing::numeric_gradient(loss, gate);
  EXPECT_LT(testing::max_relative_error(dgate.to_doubles(), expected_dgate), 1e-8);
  EXPECT_EQ(dgate.to_doubles()[2], 0.0);  // lane 2 is read by no term
  EXPECT_EQ(dgate.to_doubles()[4], 0.0);
}

TEST(Mix, BackwardOverwriteMayAliasDout) {
  // Residual gradient in place: dx = ρ·dout written over dout, while a second term still sees the old dout.
  Tensor dout = Tensor::from_doubles(std::vector<double>{1, 2}, {1, 2}, DType::f64);
  Tensor x = Tensor::from_doubles(std::vector<double>{3, 4}, {1, 2}, DType::f64);
  Tensor a = Tensor::from_doubles(std::vector<double>{5, 6}, {1, 2}, DType::f64);
  Tensor da = Tensor::from_doubles(std::vector<double>{10, 10}, {1, 2}, DType::f64);
  const std::vector<MixTerm> terms = {{x, Coef::of_scalar(scalar(0.5))}, {a, Coef::of_scalar(scalar(3.0))}};
  const std::vector<MixGrad> grads = {{.dx = dout, .overwrite_dx = true}, {.dx = da}};
  mix_backward(dout, terms, grads);
  EXPECT_EQ(dout.to_doubles(), (std::vector<double>{0.5, 1.0}));
  EXPECT_EQ(da.to_doubles(), (std::vector<double>{13, 16}));
}

TEST(Mix, OverwritingTermsIgnoreWhatTheirDxHeldAndLaterTermsAddOnTop) {
  // Fresh (uninitialised) gradient buffers: every overwriting term writes its dx whatever it held; a tensor mixed
  // twice collects the second term's share on top of the first one's overwrite.
  Tensor dout = Tensor::from_doubles(std::vector<double>{1, 2}, {1, 2}, DType::f64);
  Tensor x = Tensor::from_doubles(std::vector<double>{3, 4}, {1, 2}, DType::f64);
  Tensor dx = Tensor::from_doubles(std::vector<double>{99, -99}, {1, 2}, DType::f64);
  Tensor da = Tensor::from_doubles(std::vector<double>{7, 7}, {1, 2}, DType::f64);
  const std::vector<MixTerm> terms = {
      {x, Coef::of_scalar(scalar(0.5))}, {x, Coef::of_scalar(scalar(3.0))}, {x, Coef::one()}};
  const std::vector<MixGrad> grads = {{.dx = dx, .overwrite_dx = true}, {.dx = dx}, {.dx = da, .overwrite_dx = true}};
  mix_backward(dout, terms, grads);
  EXPECT_EQ(dx.to_doubles(), (std::vector<double>{3.5, 7.0}));
  EXPECT_EQ(da.to_doubles(), (std::vector<double>{1, 2}));
}

TEST(Mix, ScaleWeightForwardAndBackward) {
  Tensor w = random_tensor({4, 3}, DType::f64, 7);
  Tensor lambda = scalar(1.7);
  Tensor w_out = Tensor::empty({4, 3}, DType::f64);
  const Tensor upstream = random_tensor({4, 3}, DType::f64, 8);
  auto loss = [&] {
    scale_weight_forward(w, lambda, w_out);
    return testing::dot(w_out, upstream);
  };
  loss();
  EXPECT_DOUBLE_EQ(w_out.to_doubles()[5], 1.7 * w.to_doubles()[5]);
  Tensor dw = Tensor::zeros({4, 3}, DType::f64), dl = scalar(0.0);
  scale_weight_backward(upstream, w, lambda, dw, dl);
  EXPECT_LT(testing::max_relative_error(dw.to_doubles(), testing::numeric_gradient(loss, w)), 1e-8);
  EXPECT_LT(testing::max_relative_error(dl.to_doubles(), testing::numeric_gradient(loss, lambda)), 1e-8);
}

TEST(Mix, ScaleWeightBf16UsesRoundedLambda) {
  Tensor w = Tensor::from_doubles(std::vector<double>{3.0}, {1, 1}, DType::bf16);
  Tensor out = Tensor::empty({1, 1}, DType::bf16);
  scale_weight_forward(w, scalar(1.0039, DType::f32), out);
  EXPECT_EQ(out.to_doubles()[0], 3.0);
}

// mix_rmsnorm_forward is mix_forward then rmsnorm_forward: out, y and rstd as the two ops make them, the norm over
// out's last dimension (here [3, 2, 4]: six rows of four), in place too; y and rstd are checked like the norm's.
TEST(Mix, WithItsNormIsTheMixThenTheNorm) {
  for (const Shape& shape : {Shape{5, 8}, Shape{3, 2, 4}}) {
    const Tensor x = random_tensor(shape, DType::f32, 31), a = random_tensor(shape, DType::f32, 32);
    const std::vector<MixTerm> terms = {{x, Coef::of_scalar(scalar(0.75, DType::f32))}, {a, Coef::one()}};
    const int64_t norm_rows = x.numel() / x.size(-1);
    Tensor out_ref = Tensor::empty(shape, DType::f32), y_ref = out_ref.clone(),
           rstd_ref = Tensor::empty({norm_rows}, DType::f32);
    mix_forward(terms, out_ref);
    rmsnorm_forward(out_ref, y_ref, rstd_ref);
    Tensor out = Tensor::empty(shape, DType::f32), y = out.clone(), rstd = rstd_ref.clone();
    mix_rmsnorm_forward(terms, out, y, rstd);
    EXPECT_EQ(out.to_doubles(), out_ref.to_doubles()) << shape_string(shape);
    EXPECT_EQ(y.to_doubles(), y_ref.to_doubles()) << shape_string(shape);
    EXPECT_EQ(rstd.to_doubles(), rstd_ref.to_doubles()) << shape_string(shape);
    Tensor in_place = x.clone();
    const std::vector<MixTerm> onto_x = {{in_place, Coef::of_scalar(scalar(0.75, DType::f32))}, {a, Coef::one()}};
    mix_rmsnorm_forward(onto_x, in_place, y, rstd);
    EXPECT_EQ(in_place.to_doubles(), out_ref.to_doubles()) << shape_string(shape);
    EXPECT_EQ(y.to_doubles(), y_ref.to_doubles()) << shape_string(shape);
  }
  const Tensor x = random_tensor({5, 8}, DType::f32, 33);
  const MixTerm term{x, Coef::one()};
  Tensor out = Tensor::empty({5, 8}, DType::f32), y = out.clone(), short_rstd = Tensor::empty({4}, DType::f32);
  try {
    mix_rmsnorm_forward({&term, 1}, out, y, short_rstd);
    ADD_FAILURE() << "a [4] rstd for 5 rows was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mix_rmsnorm_forward: rstd"), std::string::npos) << e.what();
  }
  Tensor y_bf16 = Tensor::empty({5, 8}, DType::bf16), rstd = Tensor::empty({5}, DType::f32);
  EXPECT_THROW(mix_rmsnorm_forward({&term, 1}, out, y_bf16, rstd), Error);
}

TEST(Mix, RejectsBadArguments) {
  Tensor x = Tensor::zeros({2, 4}, DType::f32);
  Tensor out = Tensor::zeros({2, 4}, DType::f32);
  Tensor gate = Tensor::zeros({2, 3}, DType::f32);
  const MixTerm lane_outside{x, Coef::of_lane(gate, 2, 2)};
  EXPECT_THROW(mix_forward({&lane_outside, 1}, out), Error);
  const MixTerm groups_not_dividing{x, Coef::of_lane(gate, 0, 3)};
  EXPECT_THROW(mix_forward({&groups_not_dividing, 1}, out), Error);
  const MixTerm f64_scalar{x, Coef::of_scalar(scalar(1.0))};  // f32 activations need an f32 scalar
  EXPECT_THROW(mix_forward({&f64_scalar, 1}, out), Error);
  Tensor wrong = Tensor::zeros({2, 5}, DType::f32);
  const MixTerm wrong_shape{wrong, Coef::one()};
  EXPECT_THROW(mix_forward({&wrong_shape, 1}, out), Error);
  const std::vector<MixTerm> two = {{x, Coef::one()}, {x, Coef::one()}};
  const std::vector<MixGrad> both_overwrite = {{.dx = out, .overwrite_dx = true}, {.dx = out, .overwrite_dx = true}};
  EXPECT_THROW(mix_backward(x, two, both_overwrite), Error);  // the second would erase the first's share
  const std::vector<MixGrad> add_then_overwrite = {{.dx = out}, {.dx = out, .overwrite_dx = true}};
  EXPECT_THROW(mix_backward(x, two, add_then_overwrite), Error);
  Tensor dout = Tensor::zeros({2, 4}, DType::f32);
  const std::vector<MixGrad> adds_into_dout = {{.dx = dout}, {}};
  EXPECT_THROW(mix_backward(dout, two, adds_into_dout), Error);  // dout may be a dx only of an overwriting term
  const std::vector<MixGrad> two_into_dout = {{.dx = dout, .overwrite_dx = true}, {.dx = dout, .overwrite_dx = true}};
  EXPECT_THROW(mix_backward(dout, two, two_into_dout), Error);
}

}  // namespace
}  // namespace gpt
