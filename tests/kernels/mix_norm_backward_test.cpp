// mix_rmsnorm_backward (kernels/elementwise.h) is rmsnorm_backward into a copy of the old gradient, then
// mix_backward of the result: every gradient bit for bit, with and without an old gradient, for one to five terms
// with scalar, sigmoid-scalar, lane, offset-lane and unrounded coefficients; its argument errors name the argument.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {
namespace mix_norm_backward_cpu {  // apart from the names of the other tests of a unity batch

using testing::random_tensor;

Tensor scalar(double v) { return Tensor::from_doubles(std::vector<double>{v}, {1}, DType::f32); }

constexpr int64_t kRows = 6, kWidth = 16;

// Term k of up to five: ρ·x0, σ(λ)·G[:, 0]·x1, (1 + G[:, 1])·x2, 0.1 (unrounded)·x3, x4.
struct NormedMix {
  std::vector<Tensor> x;
  Tensor rho = scalar(0.8125), lam = scalar(-0.37), tenth = scalar(0.1);
  Tensor lanes = random_tensor({kRows, 3}, DType::bf16, 60);
  Tensor normed_x = random_tensor({kRows, kWidth}, DType::bf16, 61);  // the mix's output, the norm's input
  Tensor dy = random_tensor({kRows, kWidth}, DType::bf16, 62);
  Tensor rstd = Tensor::empty({kRows}, DType::f32);

  explicit NormedMix(int terms) {
    for (int k = 0; k < terms; ++k) x.push_back(random_tensor({kRows, kWidth}, DType::bf16, 50 + k));
    Tensor y = Tensor::empty({kRows, kWidth}, DType::bf16);
    rmsnorm_forward(normed_x, y, rstd);
  }
  std::vector<MixTerm> terms() const {
    const Coef coefs[5] = {Coef::of_scalar(rho), Coef::sigmoid_scalar(lam).times_lane(lanes, 0),
                           Coef::of_lane(lanes, 1).plus(1.0f), Coef::unrounded_scalar(tenth), Coef::one()};
    std::vector<MixTerm> t;
    for (size_t k = 0; k < x.size(); ++k) t.push_back({x[k], coefs[k]});
    return t;
  }
};

// The gradient outputs, started from the same values in every run: dx added into (term 1 overwrites), the
// scalars' and lanes' gradients (two terms' lanes in one tensor); with `dx_is_old`, the last term overwrites the
// old gradient itself (the in-place residual gradient).
struct Grads {
  Tensor old = random_tensor({kRows, kWidth}, DType::bf16, 70);
  Tensor dlanes = random_tensor({kRows, 3}, DType::bf16, 71);
  std::vector<Tensor> dx, dscalar;
  std::vector<MixGrad> grads;

  Grads(const NormedMix& s, bool dx_is_old) {
    const size_t n = s.x.size();
    for (size_t k = 0; k < n; ++k) {
      dx.push_back(random_tensor({kRows, kWidth}, DType::bf16, 80 + k));
      dscalar.push_back(scalar(0.25 - 0.5 * static_cast<double>(k)));
    }
    const std::vector<MixTerm> terms = s.terms();
    for (size_t k = 0; k < n; ++k) {
      MixGrad g{.dx = dx[k], .overwrite_dx = k == 1};
      if (dx_is_old && k == n - 1) g = MixGrad{.dx = old, .overwrite_dx = true};
      if (terms[k].coef.scalar.defined()) g.dscalar = dscalar[k];
      if (terms[k].coef.lanes.defined()) g.dlanes = dlanes;
      grads.push_back(g);
    }
  }
  std::vector<std::vector<double>> results() const {
    std::vector<std::vector<double>> r = {old.to_doubles(), dlanes.to_doubles()};
    for (const Tensor& t : dx) r.push_back(t.to_doubles());
    for (const Tensor& t : dscalar) r.push_back(t.to_doubles());
    return r;
  }
};

enum class Old { none, undefined, given, is_a_dx };

std::vector<std::vector<double>> run(int terms, Old old, bool fused) {
  const NormedMix s(terms);
  Grads g(s, old == Old::is_a_dx);
  const bool has_old = old == Old::given || old == Old::is_a_dx;
  if (fused) {
    const Tensor undefined;
    const Tensor* old_arg = has_old ? &g.old : (old == Old::undefined ? &undefined : nullptr);
    mix_rmsnorm_backward(old_arg, s.dy, s.normed_x, s.rstd, s.terms(), g.grads);
  } else {
    Tensor dout = has_old ? g.old.clone() : Tensor::empty({kRows, kWidth}, DType::bf16);
    rmsnorm_backward(s.dy, s.normed_x, s.rstd, dout, has_old ? GradWrite::add : GradWrite::overwrite);
    mix_backward(dout, s.terms(), g.grads);
  }
  return g.results();
}

TEST(MixRmsnormBackward, IsTheNormBackwardThenTheMixBackward) {
  for (int terms = 1; terms <= 5; ++terms) {
    for (Old old : {Old::none, Old::undefined, Old::given, Old::is_a_dx}) {
      SCOPED_TRACE(std::to_string(terms) + " terms, old case " + std::to_string(static_cast<int>(old)));
      const auto fused = run(terms, old, true), reference = run(terms, old, false);
      ASSERT_EQ(fused.size(), reference.size());
      for (size_t i = 0; i < fused.size(); ++i) EXPECT_EQ(fused[i], reference[i]) << "result " << i;
    }
  }
  // The old gradient enters: with it the results differ from those without.
  EXPECT_NE(run(4, Old::given, true)[2], run(4, Old::none, true)[2]);
}

void expect_error_naming(const std::string& what, const auto& call) {
  try {
    call();
    ADD_FAILURE() << "accepted: " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(MixRmsnormBackward, ErrorsNameTheArgument) {
  const NormedMix s(2);
  Grads g(s, false);
  const std::vector<MixTerm> terms = s.terms();
  const Tensor short_dy = random_tensor({kRows, kWidth - 1}, DType::bf16, 90);
  expect_error_naming("mix_rmsnorm_backward: dy",
                      [&] { mix_rmsnorm_backward(nullptr, short_dy, s.normed_x, s.rstd, terms, g.grads); });
  const Tensor short_rstd = Tensor::empty({kRows - 1}, DType::f32);
  expect_error_naming("mix_rmsnorm_backward: rstd",
                      [&] { mix_rmsnorm_backward(nullptr, s.dy, s.normed_x, short_rstd, terms, g.grads); });
  const Tensor f32_old = Tensor::zeros({kRows, kWidth}, DType::f32);
  expect_error_naming("mix_rmsnorm_backward: dout_old",
                      [&] { mix_rmsnorm_backward(&f32_old, s.dy, s.normed_x, s.rstd, terms, g.grads); });
  std::vector<MixGrad> wide_dx = g.grads;
  wide_dx[0].dx = Tensor::zeros({kRows, kWidth + 8}, DType::bf16);
  expect_error_naming("mix_rmsnorm_backward: dx",
                      [&] { mix_rmsnorm_backward(nullptr, s.dy, s.normed_x, s.rstd, terms, wide_dx); });
  std::vector<MixGrad> adds_into_old = g.grads;
  adds_into_old[0] = MixGrad{.dx = g.old};
  expect_error_naming("dout itself",
                      [&] { mix_rmsnorm_backward(&g.old, s.dy, s.normed_x, s.rstd, terms, adds_into_old); });
  std::vector<MixGrad> stray_dlanes = g.grads;
  stray_dlanes[0].dlanes = g.dlanes;  // term 0 has no lanes
  expect_error_naming("mix_rmsnorm_backward: dlanes given",
                      [&] { mix_rmsnorm_backward(nullptr, s.dy, s.normed_x, s.rstd, terms, stray_dlanes); });
  const std::vector<MixGrad> one_grad = {g.grads[0]};
  expect_error_naming("1 grads for 2 terms",
                      [&] { mix_rmsnorm_backward(nullptr, s.dy, s.normed_x, s.rstd, terms, one_grad); });
}

}  // namespace mix_norm_backward_cpu
}  // namespace
}  // namespace gpt
