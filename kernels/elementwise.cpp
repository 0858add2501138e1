#include "kernels/elementwise.h"

#include <string>

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

namespace {

// grads against terms and the tensor dout has the shape of (`like`); `dout` is the tensor a term's dx may be (only
// an overwriting one), or null.
void check_grads(const Tensor& like, const Tensor* dout, std::span<const MixTerm> terms, std::span<const MixGrad> grads,
                 const char* op) {
  const std::string name(op);
  const std::string dx_what = name + ": dx", dscalar_what = name + ": dscalar", dlanes_what = name + ": dlanes";
  GPT_CHECK(grads.size() == terms.size(), op, ": ", grads.size(), " grads for ", terms.size(), " terms");
  int dout_writers = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    const MixGrad& g = grads[k];
    if (g.dx.defined()) {
      check_shape(g.dx, like.shape(), dx_what.c_str());
      check_dtype(g.dx, like.dtype(), dx_what.c_str());
      check_same_device({&g.dx, &like}, dx_what.c_str());
      if (dout != nullptr && g.dx.raw() == dout->raw()) {
        GPT_CHECK(g.overwrite_dx, op, ": term ", k, "'s dx is dout itself, which only an overwriting term may be");
        ++dout_writers;
      }
      for (size_t j = 0; j < k && g.overwrite_dx; ++j) {
        GPT_CHECK(!grads[j].dx.defined() || grads[j].dx.raw() != g.dx.raw(), op, ": term ", k,
                  " overwrites the dx that term ", j, " writes first");
      }
    }
    if (g.dscalar.defined()) {
      GPT_CHECK(terms[k].coef.scalar.defined(), op, ": dscalar given for term ", k, " without a scalar");
      check_shape(g.dscalar, {1}, dscalar_what.c_str());
      check_dtype(g.dscalar, terms[k].coef.scalar.dtype(), dscalar_what.c_str());
    }
    if (g.dlanes.defined()) {
      GPT_CHECK(terms[k].coef.lanes.defined(), op, ": dlanes given for term ", k, " without lanes");
      check_shape(g.dlanes, terms[k].coef.lanes.shape(), dlanes_what.c_str());
      check_dtype(g.dlanes, terms[k].coef.lanes.dtype(), dlanes_what.c_str());
    }
  }
  GPT_CHECK(dout_writers <= 1, op, ": at most one term's dx may be dout itself, got ", dout_writers);
}

}  // namespace

void mix_backward(const Tensor& dout, std::span<const MixTerm> terms, std::span<const MixGrad> grads) {
  check_terms(terms, dout, "mix_backward");
  check_grads(dout, &dout, terms, grads, "mix_backward");
  GPT_BACKEND_CALL(dout.device(), mix_backward, dout, terms, grads);
}

void mix_rmsnorm_backward(const Tensor* dout_old, const Tensor& dy, const Tensor& x, const Tensor& rstd,
                          std::span<const MixTerm> terms, std::span<const MixGrad> grads) {
  constexpr const char* kOp = "mix_rmsnorm_backward";
  check_terms(terms, x, kOp);
  check_shape(dy, x.shape(), "mix_rmsnorm_backward: dy");
  check_dtype(dy, x.dtype(), "mix_rmsnorm_backward: dy");
  check_shape(rstd, {x.numel() / x.size(-1)}, "mix_rmsnorm_backward: rstd");
  check_dtype(rstd, stat_dtype(x.dtype()), "mix_rmsnorm_backward: rstd");
  check_same_device({&dy, &x, &rstd}, kOp);
  const Tensor* old = dout_old != nullptr && dout_old->defined() ? dout_old : nullptr;
  if (old != nullptr) {
    check_shape(*old, x.shape(), "mix_rmsnorm_backward: dout_old");
    check_dtype(*old, x.dtype(), "mix_rmsnorm_backward: dout_old");
    check_same_device({old, &x}, "mix_rmsnorm_backward: dout_old");
  }
  check_grads(x, old, terms, grads, kOp);
  GPT_BACKEND_CALL(x.device(), mix_rmsnorm_backward, old, dy, x, rstd, terms, grads);
}

}  // namespace gpt
