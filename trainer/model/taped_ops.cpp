#include "trainer/model/taped_ops.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "kernels/activation.h"
#include "kernels/bigram.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/head_gate.h"
#include "kernels/key_offset.h"
#include "kernels/qk_norm_rotary.h"
#include "kernels/rmsnorm.h"
#include "kernels/smear.h"
#include "kernels/value_gate.h"
#include "kernels/xsa.h"

namespace gpt::taped {

// A norm folded into its mix (PendingNorm): shared by the two backward steps.
struct FoldedNorm {
  Tensor rstd;  // set when the rmsnorm is recorded: the fold is on
  Tensor dy;    // the norm output's gradient, from the norm's step to the mix's
};

namespace {

Tensor new_like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); }

// The gradient slot of an input, or a throw-away zero buffer for inputs without one (ops whose backward writes
// several gradients at once need every output).
Tensor grad_or_scratch(Var& v) {
  if (v.requires_grad()) return v.grad();
  return Tensor::zeros(v.value().shape(), v.value().dtype(), v.value().device());
}

// An optimisation switch of the environment (CONTRIBUTING, debugging aids): on unless `name`=0.
bool switched_on(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::string(v) != "0";
}

// SPEEDRUN_FIRST_WRITERS=0 (read once) makes the ops that take a GradWrite add into zero-filled gradients again,
// as before first writers could overwrite: a switch for telling a fault of those write modes from one elsewhere.
bool first_writers_overwrite() {
  static const bool on = switched_on("SPEEDRUN_FIRST_WRITERS");
  return on;
}

// An input's gradient buffer for an op that writes all of it, and how the op stores it.
struct GradTarget {
  Tensor grad;
  GradWrite write;
};

// Written by its first writer (no zero fill), else added; inputs without a slot get a throw-away buffer that is
// written.
GradTarget grad_to_write(Var& v) {
  if (!first_writers_overwrite()) return {grad_or_scratch(v), GradWrite::add};
  if (!v.requires_grad()) {
    return {Tensor::empty(v.value().shape(), v.value().dtype(), v.value().device()), GradWrite::overwrite};
  }
  bool fresh = false;
  Tensor& g = v.grad_for_overwrite(fresh);
  return {g, fresh ? GradWrite::overwrite : GradWrite::add};
}

// x's gradient += g (same shape and dtype), through the mix op's backward with a unit coefficient; its first writer
// copies g instead (the mix's overwrite mode).
void pass_gradient(const Tensor& g, Var& x) {
  const GradTarget dx = grad_to_write(x);
  const MixTerm unit{g, Coef::one()};
  const MixGrad grad{.dx = dx.grad, .overwrite_dx = dx.write == GradWrite::overwrite};
  mix_backward(g, {&unit, 1}, {&grad, 1});
}

// x's gradient as the output of a GEMM that produces a share of it: beta = 0 (written, no zero fill) when the GEMM
// is its first writer, else 1 (added).
Tensor& gemm_gradient(Var& x, float& beta) {
  bool fresh = false;
  Tensor& g = x.grad_for_overwrite(fresh);
  beta = fresh ? 0.0f : 1.0f;
  return g;
}

bool present(Var v) { return v.value().defined(); }

// The Vars of a mix for the tape's step record: the output, then each term's x, scalar and lanes.
std::vector<Var> mix_vars(const Var& out, const std::vector<Term>& terms) {
  std::vector<Var> vars{out};
  for (const Term& t : terms) {
    vars.push_back(t.x);
    if (present(t.scalar)) vars.push_back(t.scalar);
    if (present(t.lanes)) vars.push_back(t.lanes);
  }
  return vars;
}

}  // namespace

Var view(Tape& tape, Var& x, const Shape& shape) {
  if (!tape.enabled() || !x.requires_grad()) return Var(x.value().view(shape), false);
  return Var::reshaped(x, shape);
}

Var slice(Tape& tape, Var& x, int64_t begin, int64_t end) {
  if (!tape.enabled() || !x.requires_grad()) return Var(x.value().slice(begin, end), false);
  return Var::with_gradient_buffer(x.value().slice(begin, end), x.grad().slice(begin, end));
}

namespace {

// rmsnorm's output Var for x, from forward results made here or with x's mix, and its backward step on the tape.
Var record_rmsnorm(Tape& tape, Var x, Tensor y, Tensor rstd) {
  Var out(std::move(y));
  tape.push(
      [x, out, rstd]() mutable {
        if (!out.has_grad() || !x.requires_grad()) return;
        auto [dx, write] = grad_to_write(x);  // the final norm's and cache7's are first written here
        rmsnorm_backward(out.grad(), x.value(), rstd, dx, write);
      },
      "rmsnorm", {out, x});
  return out;
}

// The norm's step of a fold: hands the norm output's gradient to the mix's step, which the tape runs next.
Var record_folded_rmsnorm(Tape& tape, Var x, Tensor y, std::shared_ptr<FoldedNorm> fold) {
  Var out(std::move(y));
  tape.push(
      [x, out, fold]() mutable {
        if (!out.has_grad() || !x.requires_grad()) return;
        fold->dy = out.grad();
      },
      "rmsnorm", {out, x});
  return out;
}

Tensor rstd_for(const Tensor& x) { return Tensor::empty({x.numel() / x.size(-1)}, stat_dtype(x.dtype()), x.device()); }

bool fuse_mix_norm() {
  static const bool on = switched_on("SPEEDRUN_MIX_NORM");
  return on;
}

std::atomic<int> fold_override{-1};  // detail::ScopedMixNormBackwardFold's choice; -1: the environment's

bool fold_mix_norm_backward() {
  static const bool on = switched_on("SPEEDRUN_MIX_NORM_BACKWARD");
  const int forced = fold_override.load();
  return forced < 0 ? on : forced != 0;
}

}  // namespace

namespace detail {
ScopedMixNormBackwardFold::ScopedMixNormBackwardFold(bool on) : previous_(fold_override.exchange(on ? 1 : 0)) {}
ScopedMixNormBackwardFold::~ScopedMixNormBackwardFold() { fold_override.store(previous_); }
}  // namespace detail

Var rmsnorm(Tape& tape, Var x) {
  const Tensor& xv = x.value();
  Tensor y = new_like(xv);
  Tensor rstd = rstd_for(xv);
  rmsnorm_forward(xv, y, rstd);
  return record_rmsnorm(tape, std::move(x), std::move(y), std::move(rstd));
}

Var rmsnorm(Tape& tape, Var x, PendingNorm& pending) {
  const Tensor& xv = x.value();
  if (!pending.waiting() || pending.of.raw() != xv.raw() || pending.of.shape() != xv.shape()) return rmsnorm(tape, x);
  PendingNorm ready = std::exchange(pending, PendingNorm{});
  // Folded only when the norm's step comes right after the mix's: in the backward no other reader of x adds to its
  // gradient between the two, so forming it inside the mix's step adds the same terms in the same order.
  if (ready.fold != nullptr && tape.enabled() && tape.size() == ready.tape_steps_after_mix) {
    ready.fold->rstd = std::move(ready.rstd);
    return record_folded_rmsnorm(tape, std::move(x), std::move(ready.y), std::move(ready.fold));
  }
  return record_rmsnorm(tape, std::move(x), std::move(ready.y), std::move(ready.rstd));
}

Var linear(Tape& tape, Var x, Var w) {
  Tensor y = Tensor::empty({x.value().size(0), w.value().size(0)}, x.value().dtype(), x.value().device());
  gemm(x.value(), w.value(), y, {.trans_b = true});
  Var out(y);
  tape.push(
      [x, w, out]() mutable {
        if (!out.has_grad()) return;
        if (x.requires_grad()) {
          float beta = 1.0f;
          Tensor& dx = gemm_gradient(x, beta);
          gemm(out.grad(), w.value(), dx, {.beta = beta});
        }
        if (w.requires_grad()) {  // a λ-scaled weight's gradient is fresh each step: written, not added into zeros
          float beta = 1.0f;
          Tensor& dw = gemm_gradient(w, beta);
          gemm(out.grad(), x.value(), dw, {.trans_a = true, .beta = beta});
        }
      },
      "linear", {out, x, w});
  return out;
}

Var matmul(Tape& tape, Var x, Var w) {
  Tensor y = Tensor::empty({x.value().size(0), w.value().size(1)}, x.value().dtype(), x.value().device());
  gemm(x.value(), w.value(), y);
  Var out(y);
  tape.push(
      [x, w, out]() mutable {
        if (!out.has_grad()) return;
        if (x.requires_grad()) {
          float beta = 1.0f;
          Tensor& dx = gemm_gradient(x, beta);
          gemm(out.grad(), w.value(), dx, {.trans_b = true, .beta = beta});
        }
        if (w.requires_grad()) {
          float beta = 1.0f;
          Tensor& dw = gemm_gradient(w, beta);
          gemm(x.value(), out.grad(), dw, {.trans_a = true, .beta = beta});
        }
      },
      "matmul", {out, x, w});
  return out;
}

Var gelu(Tape& tape, Var x) {
  Tensor y = new_like(x.value());
  gelu_forward(x.value(), y);
  Var out(y);
  tape.push(
      [x, out]() mutable {
        if (!out.has_grad() || !x.requires_grad()) return;
        gelu_backward(out.grad(), x.value(), x.grad());
      },
      "gelu", {out, x});
  return out;
}

Var bias_add(Tape& tape, Var x, Var bias) {
  Tensor y = new_like(x.value());
  bias_add_forward(x.value(), bias.value(), y);
  Var out(y);
  tape.push(
      [x, bias, out]() mutable {
        if (!out.has_grad()) return;
        if (x.requires_grad()) pass_gradient(out.grad(), x);
        if (bias.requires_grad()) bias_backward(out.grad(), bias.grad());
      },
      "bias_add", {out, x, bias});
  return out;
}

Term Term::scaled(Var s) const {
  Term t = *this;
  t.scalar = s;
  t.fn = ScalarFn::identity;
  return t;
}
Term Term::sigmoid_scaled(Var s) const {
  Term t = *this;
  t.scalar = s;
  t.fn = ScalarFn::sigmoid;
  return t;
}
Term Term::times_lane(Var g, int64_t lane_index, int64_t n_groups) const {
  Term t = *this;
  t.lanes = g;
  t.lane = lane_index;
  t.groups = n_groups;
  return t;
}
Term Term::plus(float constant) const {
  Term t = *this;
  t.offset = constant;
  return t;
}

namespace {
std::vector<MixTerm> mix_terms(const std::vector<Term>& terms) {
  std::vector<MixTerm> out;
  out.reserve(terms.size());
  for (const Term& t : terms) {
    Coef c;
    if (present(t.scalar)) {
      c.scalar = t.scalar.value();
      c.fn = t.fn;
    }
    if (present(t.lanes)) {
      c.lanes = t.lanes.value();
      c.lane = t.lane;
      c.groups = t.groups;
      c.offset = t.offset;
    }
    out.push_back(MixTerm{t.x.value(), c});
  }
  return out;
}

// mix's output Var and its backward step on the tape; with `fold`, the step also runs the backward of a norm of the
// output that was folded into it (the norm's step hands over its output gradient).
Var record_mix(Tape& tape, const std::vector<Term>& terms, Tensor y, std::shared_ptr<FoldedNorm> fold = nullptr) {
  Var out(std::move(y));
  tape.push(
      [terms = terms, out, fold]() mutable {
        const Tensor norm_dy = fold != nullptr ? std::exchange(fold->dy, Tensor{}) : Tensor{};
        if (!out.has_grad() && !norm_dy.defined()) return;
        std::vector<MixGrad> grads(terms.size());
        for (size_t k = 0; k < terms.size(); ++k) {
          Term& t = terms[k];
          if (t.x.requires_grad()) grads[k].dx = t.x.grad_for_overwrite(grads[k].overwrite_dx);
          if (present(t.scalar) && t.scalar.requires_grad()) grads[k].dscalar = t.scalar.grad();
          if (present(t.lanes) && t.lanes.requires_grad()) grads[k].dlanes = t.lanes.grad();
        }
        if (!norm_dy.defined()) {
          mix_backward(out.grad(), mix_terms(terms), grads);
          return;
        }
        // The gradient gathered so far, which the norm's adds to; none yet: the norm's is its first writer (adding
        // into zeros instead while first writers are off, as the norm's own step would).
        const bool has_old = out.has_grad() || !first_writers_overwrite();
        mix_rmsnorm_backward(has_old ? &out.grad() : nullptr, norm_dy, out.value(), fold->rstd, mix_terms(terms),
                             grads);
      },
      "mix", mix_vars(out, terms));
  return out;
}

}  // namespace

Var mix(Tape& tape, const std::vector<Term>& terms) {
  GPT_CHECK(!terms.empty(), "taped::mix: needs at least one term");
  Tensor y = new_like(terms.front().x.value());
  mix_forward(mix_terms(terms), y);
  return record_mix(tape, terms, std::move(y));
}

Var mix_normed(Tape& tape, const std::vector<Term>& terms, PendingNorm& pending) {
  GPT_CHECK(!pending.waiting(), "taped::mix_normed: the norm of ", pending.of.describe(),
            " made with an earlier mix was never used");
  if (!fuse_mix_norm()) return mix(tape, terms);
  GPT_CHECK(!terms.empty(), "taped::mix_normed: needs at least one term");
  const Tensor& like = terms.front().x.value();
  Tensor y = new_like(like), normed = new_like(like), rstd = rstd_for(like);
  mix_rmsnorm_forward(mix_terms(terms), y, normed, rstd);
  std::shared_ptr<FoldedNorm> fold = fold_mix_norm_backward() ? std::make_shared<FoldedNorm>() : nullptr;
  pending = PendingNorm{.of = y, .y = std::move(normed), .rstd = std::move(rstd), .fold = fold};
  Var out = record_mix(tape, terms, std::move(y), std::move(fold));
  pending.tape_steps_after_mix = tape.size();
  return out;
}

Var scale_weight(Tape& tape, Var w, Var lambda) { return mix(tape, {term(w).scaled(lambda)}); }

Var embedding(Tape& tape, Var table, const Tensor& ids) {
  Tensor y = Tensor::empty({ids.numel(), table.value().size(1)}, table.value().dtype(), table.value().device());
  embedding_forward(table.value(), ids, y);
  Var out(y);
  tape.push(
      [table, ids, out]() mutable {
        if (!out.has_grad() || !table.requires_grad()) return;
        embedding_backward(out.grad(), ids, table.grad());
      },
      "embedding", {out, table});
  return out;
}

Var value_embedding(Tape& tape, Var table, const Tensor& ids, int64_t plane, int64_t vocab) {
  Tensor y = Tensor::empty({ids.numel(), table.value().size(1)}, table.value().dtype(), table.value().device());
  value_embedding_forward(table.value(), ids, plane, y, vocab);
  Var out(y);
  tape.push(
      [table, ids, plane, vocab, out]() mutable {
        if (!out.has_grad() || !table.requires_grad()) return;
        value_embedding_backward(out.grad(), ids, plane, table.grad(), vocab);
      },
      "value_embedding", {out, table});
  return out;
}

Var bigram(Tape& tape, Var table, const Tensor& sign_table, const Tensor& ids, const Tensor& sign_ids) {
  Tensor y = Tensor::empty({ids.numel(), table.value().size(1)}, table.value().dtype(), table.value().device());
  bigram_forward(table.value(), sign_table, ids, sign_ids, y);
  Var out(y);
  tape.push(
      [table, sign_table, ids, sign_ids, out]() mutable {
        if (!out.has_grad() || !table.requires_grad()) return;
        bigram_backward(out.grad(), sign_table, ids, sign_ids, table.grad());
      },
      "bigram", {out, table});
  return out;
}

Var ngram_embed(Tape& tape, NgramTable& table, const Microbatch& batch) {
  Var out(table.forward(batch));
  // The closure owns copies of the ids: the tape may be replayed after the microbatch is gone.
  auto rows = std::make_shared<const std::vector<int32_t>>(batch.ngram_rows);
  auto sign_rows = std::make_shared<const std::vector<int32_t>>(batch.ngram_sign_rows);
  tape.push(
      [&table, rows, sign_rows, out]() mutable {
        if (!out.has_grad()) return;
        table.accumulate_backward(*rows, *sign_rows, out.grad());
      },
      "ngram_embed", {out});
  return out;
}

Var smear(Tape& tape, Var e, Var gate, Var lambda) {
  const Tensor& ev = e.value();
  Tensor y = new_like(ev);
  Tensor sig = Tensor::empty({ev.size(0)}, stat_dtype(ev.dtype()), ev.device());
  smear_forward(ev, gate.value(), lambda.value(), y, sig);
  Var out(y);
  tape.push(
      [e, gate, lambda, sig, out]() mutable {
        if (!out.has_grad()) return;
        Tensor de = grad_or_scratch(e), dw = grad_or_scratch(gate), dl = grad_or_scratch(lambda);
        smear_backward(out.grad(), e.value(), gate.value(), lambda.value(), sig, de, dw, dl);
      },
      "smear", {out, e, gate, lambda});
  return out;
}

Var qk_norm_rotary(Tape& tape, Var x, const Tensor& cos, const Tensor& sin, RotaryLayout layout) {
  const Tensor& xv = x.value();
  Tensor y = new_like(xv);
  Tensor rstd = Tensor::empty({xv.size(0) * xv.size(1)}, stat_dtype(xv.dtype()), xv.device());
  qk_norm_rotary_forward(xv, cos, sin, layout, y, rstd);
  Var out(y);
  tape.push(
      [x, cos, sin, layout, out, rstd]() mutable {
        if (!out.has_grad() || !x.requires_grad()) return;
        auto [dx, write] = grad_to_write(x);  // q's or k's projection (a view): nothing else writes it first
        qk_norm_rotary_backward(out.grad(), x.value(), rstd, cos, sin, layout, dx, write);
      },
      "qk_norm_rotary", {out, x});
  return out;
}

Var key_offset(Tape& tape, Var k) {
  Tensor y = new_like(k.value());
  key_offset_forward(k.value(), y);
  Var out(y);
  tape.push(
      [k, out]() mutable {
        if (!out.has_grad() || !k.requires_grad()) return;
        auto [dk, write] = grad_to_write(k);
        key_offset_backward(out.grad(), dk, write);
      },
      "key_offset", {out, k});
  return out;
}

Var value_gate(Tape& tape, Var v, Var u, Var ve, Var gate) {
  Tensor y = new_like(v.value());
  value_gate_forward(v.value(), u.value(), ve.value(), gate.value(), y);
  Var out(y);
  tape.push(
      [v, u, ve, gate, out]() mutable {
        if (!out.has_grad()) return;
        GradTarget dv = grad_to_write(v), dve = grad_to_write(ve);  // v's projection, the value plane
        Tensor du = grad_or_scratch(u), dg = grad_or_scratch(gate);
        value_gate_backward(out.grad(), u.value(), ve.value(), gate.value(), dv.grad, du, dve.grad, dg, dv.write,
                            dve.write);
      },
      "value_gate", {out, v, u, ve, gate});
  return out;
}

Var attention(Tape& tape, Var q, Var k, Var v, const Tensor& cu_seqlens, const Tensor& cu_seqlens_doubled, bool paired,
              int64_t window, float scale) {
  const Tensor& qv = q.value();
  GPT_CHECK(qv.ndim() == 3, "taped::attention: q must be [T, H, D], got ", qv.describe());
  const int64_t tokens = qv.size(0), heads = qv.size(1), dim = qv.size(2);
  GPT_CHECK(!paired || heads % 2 == 0, "taped::attention: paired heads need an even head count, got ", heads);
  const Shape shape = paired ? Shape{2 * tokens, heads / 2, dim} : qv.shape();
  const Tensor cu = paired ? cu_seqlens_doubled : cu_seqlens;
  Tensor y = new_like(qv);
  Tensor lse = Tensor::empty({shape[1], shape[0]}, stat_dtype(qv.dtype()), qv.device());
  Tensor y_view = y.view(shape);
  attention_forward(qv.view(shape), k.value().view(shape), v.value().view(shape), cu, y_view, lse, window, scale);
  Var out(y);
  tape.push(
      [q, k, v, cu, shape, lse, window, scale, out]() mutable {
        if (!out.has_grad()) return;
        // q's and k's gradients (and v's, but after XSA) are usually first written here.
        const GradTarget dq = grad_to_write(q), dk = grad_to_write(k), dv = grad_to_write(v);
        Tensor dq_view = dq.grad.view(shape), dk_view = dk.grad.view(shape), dv_view = dv.grad.view(shape);
        attention_backward(out.grad().view(shape), q.value().view(shape), k.value().view(shape), v.value().view(shape),
                           cu, out.value().view(shape), lse, dq_view, dk_view, dv_view, window, scale,
                           {dq.write, dk.write, dv.write});
      },
      "attention", {out, q, k, v});
  return out;
}

Var dc_attention(Tape& tape, Var q, Var k, Var v, const Tensor& cu_seqlens, Var gates, DcLanes lanes, Var y_core,
                 float scale) {
  const Tensor& qv = q.value();
  Tensor y = new_like(y_core.value());
  Tensor lse = Tensor::empty({qv.size(1), qv.size(0)}, stat_dtype(qv.dtype()), qv.device());
  dc_attention_forward(qv, k.value(), v.value(), cu_seqlens, gates.value(), lanes, y_core.value(), y, lse, scale);
  Var out(y);
  tape.push(
      [q, k, v, cu_seqlens, gates, lanes, y_core, lse, scale, out]() mutable {
        if (!out.has_grad()) return;
        Tensor dq = grad_or_scratch(q), dk = grad_or_scratch(k), dv = grad_or_scratch(v), dg = grad_or_scratch(gates);
        dc_attention_backward(out.grad(), q.value(), k.value(), v.value(), cu_seqlens, gates.value(), lanes, lse, dq,
                              dk, dv, dg, scale);
        // The correction is added to the core output: its gradient passes through unchanged.
        if (y_core.requires_grad()) pass_gradient(out.grad(), y_core);
      },
      "dc_attention", {out, q, k, v, gates, y_core});
  return out;
}

Var xsa(Tape& tape, Var y, Var v, Var gates, int64_t first_lane) {
  Tensor y_out = new_like(y.value());
  xsa_forward(y.value(), v.value(), gates.value(), first_lane, y_out);
  Var out(y_out);
  tape.push(
      [y, v, gates, first_lane, out]() mutable {
        if (!out.has_grad()) return;
        GradTarget dy = grad_to_write(y), dv = grad_to_write(v);  // the attention output, v: usually first here
        Tensor dg = grad_or_scratch(gates);
        xsa_backward(out.grad(), y.value(), v.value(), gates.value(), first_lane, dy.grad, dv.grad, dg, dy.write,
                     dv.write);
      },
      "xsa", {out, y, v, gates});
  return out;
}

Var head_gate(Tape& tape, Var y, Var gates, int64_t first_lane) {
  Tensor y_out = new_like(y.value());
  head_gate_forward(y.value(), gates.value(), first_lane, y_out);
  Var out(y_out);
  tape.push(
      [y, gates, first_lane, out]() mutable {
        if (!out.has_grad()) return;
        GradTarget dy = grad_to_write(y);
        Tensor dg = grad_or_scratch(gates);
        head_gate_backward(out.grad(), y.value(), gates.value(), first_lane, dy.grad, dg, dy.write);
      },
      "head_gate", {out, y, gates});
  return out;
}

Var mlp(Tape& tape, Var u, Var w1, Var w2, MlpFp8State* fp8_state, const MlpFp8Weights* fp8_weights) {
  const Tensor& uv = u.value();
  const int64_t tokens = uv.size(0), hidden = w1.value().size(0);
  Tensor pre = Tensor::empty({tokens, hidden}, uv.dtype(), uv.device());
  Tensor post = Tensor::empty({tokens, hidden}, uv.dtype(), uv.device());
  Tensor y = new_like(uv);
  if (fp8_state != nullptr && fp8_weights != nullptr) {
    mlp_fp8_forward(uv, *fp8_weights, *fp8_state, pre, post, y);
  } else if (fp8_state != nullptr) {
    mlp_fp8_forward(uv, w1.value(), w2.value(), *fp8_state, pre, post, y);
  } else {
    gemm(uv, w1.value(), pre, {.trans_b = true});
    relu_square_forward(pre, post);
    gemm(post, w2.value(), y);
  }
  Var out(y);
  // relu² backward reads only post (§2.10), so pre is not kept.
  tape.push(
      [u, w1, w2, post, out]() mutable {
        if (!out.has_grad()) return;
        const Tensor& dy = out.grad();
        Tensor dpost = new_like(post);
        gemm(dy, w2.value(), dpost, {.trans_b = true});
        if (w2.requires_grad()) gemm(post, dy, w2.grad(), {.trans_a = true, .beta = 1.0f});
        Tensor dpre = dpost;  // dpost is dead once w2's gradient has read it: the relu² gradient overwrites it
        relu_square_backward(dpost, post, dpre, GradWrite::overwrite);
        if (u.requires_grad()) {
          float beta = 1.0f;
          Tensor& du = gemm_gradient(u, beta);
          gemm(dpre, w1.value(), du, {.beta = beta});
        }
        if (w1.requires_grad()) gemm(dpre, u.value(), w1.grad(), {.trans_a = true, .beta = 1.0f});
      },
      "mlp", {out, u, w1, w2});
  return out;
}

}  // namespace gpt::taped
