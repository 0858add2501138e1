#include "kernels/normuon.h"

#include <algorithm>

#include "kernels/dispatch.h"
#include "kernels/gemm.h"

namespace gpt {

namespace {

void check_stack(const Tensor& param, const char* op) {
  GPT_CHECK(param.ndim() == 3, op, ": param must be a stack [count, rows, cols], got ", param.describe());
  GPT_CHECK(is_floating(param.dtype()), op, ": param must be f64, f32 or bf16, got ", param.describe());
}

Shape second_moment_shape(const Tensor& param) {
  const int64_t rows = param.size(1), cols = param.size(2);
  return {param.size(0), rows >= cols ? rows : cols};
}

}  // namespace

NorMuonState NorMuonState::zeros(const Tensor& param) {
  check_stack(param, "NorMuonState");
  NorMuonState s;
  const DType sd = stat_dtype(param.dtype());
  s.momentum = Tensor::zeros(param.shape(), sd, param.device());
  s.second_moment = Tensor::zeros(second_moment_shape(param), sd, param.device());
  if (param.dtype() == DType::bf16) s.mantissa = Tensor::zeros(param.shape(), DType::u16, param.device());
  return s;
}

void NorMuonState::zero_() {
  momentum.zero_();
  second_moment.zero_();
  if (mantissa.defined()) mantissa.zero_();
}

void normuon_momentum(const Tensor& grad, Tensor& momentum, Tensor& x, double mu) {
  check_stack(grad, "normuon_momentum");
  check_shape(momentum, grad.shape(), "normuon_momentum: momentum");
  check_dtype(momentum, stat_dtype(grad.dtype()), "normuon_momentum: momentum");
  check_shape(x, grad.shape(), "normuon_momentum: x");
  check_dtype(x, grad.dtype(), "normuon_momentum: x");
  check_same_device({&grad, &momentum, &x}, "normuon_momentum");
  GPT_BACKEND_CALL(grad.device(), normuon_momentum, grad, momentum, x, mu);
}

void normuon_normalize(Tensor& x) {
  check_stack(x, "normuon_normalize");
  GPT_BACKEND_CALL(x.device(), normuon_normalize, x);
}

void short_side_gram(const Tensor& x, Tensor& gram) {
  check_stack(x, "short_side_gram");
  const bool tall = x.size(1) > x.size(2);
  const int64_t k = tall ? x.size(2) : x.size(1);
  check_shape(gram, {x.size(0), k, k}, "short_side_gram: gram");
  gemm(x, x, gram, GemmArgs{.trans_a = tall, .trans_b = !tall});
}

void gram_polynomial_maps(Tensor& x, const double (*coefficients)[3], int count, Tensor& gram, bool gram_given) {
  check_stack(x, "gram_polynomial_maps");
  const int64_t matrices = x.size(0), rows = x.size(1), cols = x.size(2);
  const bool tall = rows > cols;
  const int64_t k = tall ? cols : rows;
  check_shape(gram, {matrices, k, k}, "gram_polynomial_maps: gram");
  check_dtype(gram, x.dtype(), "gram_polynomial_maps: gram");
  Tensor& a = gram;
  Tensor b = Tensor::empty({matrices, k, k}, x.dtype(), x.device());
  Tensor cur = x;  // the caller's storage; results alternate between it and a scratch buffer
  Tensor next = Tensor::empty(x.shape(), x.dtype(), x.device());
  for (int i = 0; i < count; ++i) {
    const double* coef = coefficients[i];
    // Gram matrix of the short side, then B = c·A·A + b·A and X ← a·X + B·X (X·B for tall), each rounded once.
    if (i > 0 || !gram_given) gemm(cur, cur, a, GemmArgs{.trans_a = tall, .trans_b = !tall});
    b.copy_from(a);
    gemm(a, a, b, GemmArgs{.alpha = static_cast<float>(coef[2]), .beta = static_cast<float>(coef[1])});
    next.copy_from(cur);
    if (tall) {
      gemm(cur, b, next, GemmArgs{.alpha = 1.0f, .beta = static_cast<float>(coef[0])});
    } else {
      gemm(b, cur, next, GemmArgs{.alpha = 1.0f, .beta = static_cast<float>(coef[0])});
    }
    std::swap(cur, next);
  }
  if (cur.raw() != x.raw()) x.copy_from(cur);
}

void polar_express(Tensor& x) {
  check_stack(x, "polar_express");
  const int64_t k = std::min(x.size(1), x.size(2));
  Tensor gram = Tensor::empty({x.size(0), k, k}, x.dtype(), x.device());
  gram_polynomial_maps(x, kPolarExpress, 5, gram, false);
}

void normuon_apply(const Tensor& x, Tensor& second_moment, Tensor& param, Tensor& mantissa, const NorMuonArgs& args) {
  check_stack(param, "normuon_apply");
  check_shape(x, param.shape(), "normuon_apply: x");
  check_dtype(x, param.dtype(), "normuon_apply: x");
  check_shape(second_moment, second_moment_shape(param), "normuon_apply: second_moment");
  check_dtype(second_moment, stat_dtype(param.dtype()), "normuon_apply: second_moment");
  if (param.dtype() == DType::bf16) {
    check_shape(mantissa, param.shape(), "normuon_apply: mantissa");
    check_dtype(mantissa, DType::u16, "normuon_apply: mantissa");
    check_same_device({&x, &second_moment, &param, &mantissa}, "normuon_apply");
  } else {
    GPT_CHECK(!mantissa.defined(), "normuon_apply: a mantissa is only kept for bf16 params, got ", param.describe());
    check_same_device({&x, &second_moment, &param}, "normuon_apply");
  }
  GPT_CHECK(args.first_matrix >= 0, "normuon_apply: first_matrix must be >= 0");
  GPT_BACKEND_CALL(param.device(), normuon_apply, x, second_moment, param, mantissa, args);
}

void normuon_update(Tensor& param, const Tensor& grad, NorMuonState& state, const NorMuonArgs& args) {
  check_stack(param, "normuon_update");
  check_shape(grad, param.shape(), "normuon_update: grad");
  check_dtype(grad, param.dtype(), "normuon_update: grad");
  Tensor x = Tensor::empty(param.shape(), param.dtype(), param.device());
  normuon_momentum(grad, state.momentum, x, args.momentum);
  normuon_normalize(x);
  polar_express(x);
  normuon_apply(x, state.second_moment, param, state.mantissa, args);
}

}  // namespace gpt
