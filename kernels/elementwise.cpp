#include "kernels/elementwise.h"

#include "kernels/dispatch.h"

namespace gpt {

namespace {

void check_coef(const Coef& c, const Tensor& out, const char* what) {
  if (c.scalar.defined()) {
    check_shape(c.scalar, {1}, what);
    check_dtype(c.scalar, stat_dtype(out.dtype()), what);
    check_same_device({&c.scalar, &out}, what);
  }
  if (c.lanes.defined()) {
    const int64_t rows = out.size(0);
    const int64_t n = out.numel() / rows;
    GPT_CHECK(c.lanes.ndim() == 2 && c.lanes.size(0) == rows, what, ": lanes must be [", rows, ", lanes], got ",
              c.lanes.describe());
    check_dtype(c.lanes, out.dtype(), what);
    check_same_device({&c.lanes, &out}, what);
    GPT_CHECK(c.groups >= 1 && n % c.groups == 0, what, ": groups ", c.groups, " must divide the row size ", n);
    GPT_CHECK(c.lane >= 0 && c.lane + c.groups <= c.lanes.size(1), what, ": lanes [", c.lane, ", ", c.lane + c.groups,
              ") outside the ", c.lanes.size(1), " lanes of ", c.lanes.describe());
  }
}

void check_terms(std::span<const MixTerm> terms, const Tensor& out, const char* op) {
  GPT_CHECK(!terms.empty(), op, ": needs at least one term");
  GPT_CHECK(out.ndim() >= 1 && out.numel() > 0, op, ": out must be a non-empty tensor, got ", out.describe());
  GPT_CHECK(is_floating(out.dtype()), op, ": out must be floating, got ", out.describe());
  for (const MixTerm& term : terms) {
    check_shape(term.x, out.shape(), op);
    check_dtype(term.x, out.dtype(), op);
    check_same_device({&term.x, &out}, op);
    check_coef(term.coef, out, op);
  }
}

}  // namespace

void mix_forward(std::span<const MixTerm> terms, Tensor& out) {
  check_terms(terms, out, "mix_forward");
  GPT_BACKEND_CALL(out.device(), mix_forward, terms, out);
}

void mix_rmsnorm_forward(std::span<const MixTerm> terms, Tensor& out, Tensor& y, Tensor& rstd, float eps) {
  check_terms(terms, out, "mix_rmsnorm_forward");
  check_rmsnorm_outputs(out, y, rstd, "mix_rmsnorm_forward");
  GPT_BACKEND_CALL(out.device(), mix_rmsnorm_forward, terms, out, y, rstd, eps);
}

void mix_backward(const Tensor& dout, std::span<const MixTerm> terms, std::span<const MixGrad> grads) {
  check_terms(terms, dout, "mix_backward");
  GPT_CHECK(grads.size() == terms.size(), "mix_backward: ", grads.size(), " grads for ", terms.size(), " terms");
  int dout_writers = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    const MixGrad& g = grads[k];
    if (g.dx.defined()) {
      check_shape(g.dx, dout.shape(), "mix_backward: dx");
      check_dtype(g.dx, dout.dtype(), "mix_backward: dx");
      check_same_device({&g.dx, &dout}, "mix_backward: dx");
      if (g.dx.raw() == dout.raw()) {
        GPT_CHECK(g.overwrite_dx, "mix_backward: term ", k,
                  "'s dx is dout itself, which only an overwriting term may be");
        ++dout_writers;
      }
      for (size_t j = 0; j < k && g.overwrite_dx; ++j) {
        GPT_CHECK(!grads[j].dx.defined() || grads[j].dx.raw() != g.dx.raw(), "mix_backward: term ", k,
                  " overwrites the dx that term ", j, " writes first");
      }
    }
    if (g.dscalar.defined()) {
      GPT_CHECK(terms[k].coef.scalar.defined(), "mix_backward: dscalar given for term ", k, " without a scalar");
      check_shape(g.dscalar, {1}, "mix_backward: dscalar");
      check_dtype(g.dscalar, terms[k].coef.scalar.dtype(), "mix_backward: dscalar");
    }
    if (g.dlanes.defined()) {
      GPT_CHECK(terms[k].coef.lanes.defined(), "mix_backward: dlanes given for term ", k, " without lanes");
      check_shape(g.dlanes, terms[k].coef.lanes.shape(), "mix_backward: dlanes");
      check_dtype(g.dlanes, terms[k].coef.lanes.dtype(), "mix_backward: dlanes");
    }
  }
  GPT_CHECK(dout_writers <= 1, "mix_backward: at most one term's dx may be dout itself, got ", dout_writers);
  GPT_BACKEND_CALL(dout.device(), mix_backward, dout, terms, grads);
}

}  // namespace gpt
