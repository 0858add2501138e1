#pragma once
// Weighted sums of same-shaped tensors with per-term coefficients: the residual mixes of the layer loop
// (RECIPE §2.5 step 7, §2.8, §2.12) and the λ-scaled weights of §2.9 (scale_weight).
//
//   out[t, c] = Σ_k coef_k(t, c) · x_k[t, c]
//
// t indexes the leading dimension (tokens), c the remaining n = numel / rows elements of a row. A coefficient is
//
//   coef(t, c) = S · L(t, c)
//   S = bf16(f(s))   when a scalar is given: s = one fp32 parameter entry, a [1] tensor (f64 when the activations
//                    are f64), f = identity or sigmoid; rounded to bf16 only when out is bf16 (§0.4). Else S = 1.
//                    f = unrounded: S = s as stored, never rounded — a fixed fp32 factor of the recipe (the MUDD
//                    scale 0.1 of §2.7, which the reference multiplies as a Python float, i.e. in fp32).
//   L = offset + G[t, lane + ⌊c / (n/groups)⌋]  when a lane is given: G = a gate output [rows, lanes] of out's
//                    dtype; groups > 1 gives each of `groups` equal column blocks its own lane (per-head gates).
//                    Else L = 1.
//
// Examples: ρ·x is Coef::scalar(ρ); g0_t·x0 is Coef::lane(G, 18); σ(λ_skip)·P[28] is
// Coef::sigmoid_scalar(λ_skip).times_lane(P, 28); (1 + μ5)·x is Coef::lane(M, 5).plus(1).
//
// Precision: the sum is evaluated in the accumulation type (fp32; f64 for f64) from the stored inputs and rounded
// once into out. out may be the same tensor as any x_k (in-place update): a row is read completely before it is
// written.
//
// Backward (ADDS, like every backward):
//   dx_k[t, c]      += coef_k(t, c) · dout[t, c]            (or =, when MixGrad::overwrite_dx)
//   dG[t, lane+g]   += S · Σ_{c in block g} dout[t, c] · x_k[t, c]
//   ds              += f'(s) · Σ_{t, c} L(t, c) · dout[t, c] · x_k[t, c]   (bf16 rounding of s is pass-through)
// Reductions run in the accumulation type in a fixed order (deterministic). Terms are applied in order, element by
// element, so two terms may write one dx (a tensor mixed twice) as long as an overwriting term writes it first.
// With overwrite_dx, dx_k may be the dout tensor itself (the residual gradient flows in place: dx = ρ·dout); at
// most one term may do that.
#include <span>

#include "kernels/rmsnorm.h"
#include "kernels/tensor.h"

namespace gpt {

enum class ScalarFn : uint8_t { identity, sigmoid, unrounded };

struct Coef {
  Tensor scalar{};  // undefined: S = 1
  ScalarFn fn = ScalarFn::identity;
  Tensor lanes{};  // undefined: L = 1
  int64_t lane = 0;
  int64_t groups = 1;
  float offset = 0.0f;  // only used with lanes

  static Coef one() { return {}; }
  static Coef of_scalar(const Tensor& s) { return Coef{.scalar = s}; }
  static Coef sigmoid_scalar(const Tensor& s) { return Coef{.scalar = s, .fn = ScalarFn::sigmoid}; }
  static Coef unrounded_scalar(const Tensor& s) { return Coef{.scalar = s, .fn = ScalarFn::unrounded}; }
  static Coef of_lane(const Tensor& g, int64_t lane, int64_t groups = 1) {
    return Coef{.lanes = g, .lane = lane, .groups = groups};
  }
  Coef times_lane(const Tensor& g, int64_t lane_index, int64_t n_groups = 1) const {
    Coef c = *this;
    c.lanes = g;
    c.lane = lane_index;
    c.groups = n_groups;
    return c;
  }
  Coef plus(float constant) const {
    Coef c = *this;
    c.offset = constant;
    return c;
  }
};

struct MixTerm {
  Tensor x;
  Coef coef;
};

// Gradient outputs of one term; undefined tensors are not wanted.
struct MixGrad {
  Tensor dx{};                // shape and dtype of x
  bool overwrite_dx = false;  // dx = coef·dout instead of +=
  Tensor dscalar{};           // [1], dtype of coef.scalar
  Tensor dlanes{};            // shape and dtype of coef.lanes
};

// out and every x_k: same shape and dtype (f64, f32, bf16), at least 1-D.
void mix_forward(std::span<const MixTerm> terms, Tensor& out);
// grads[k] belongs to terms[k]; terms carry the forward inputs (their x values are needed for coefficient grads).
void mix_backward(const Tensor& dout, std::span<const MixTerm> terms, std::span<const MixGrad> grads);

// mix_forward, then rmsnorm_forward of out (kernels/rmsnorm.h: y, rstd over out's last dimension): the two ops'
// results bit for bit. The CUDA path makes both in one kernel when mix_forward's one-pass version takes the call
// (the norm reads the row it has just written from shared memory instead of from global memory), else runs the two.
void mix_rmsnorm_forward(std::span<const MixTerm> terms, Tensor& out, Tensor& y, Tensor& rstd, float eps = kNormEps);

// The backward of mix_rmsnorm_forward's two ops with the norm's input gradient not stored: first
//   dout = dout_old + J_norm^T dy   (rmsnorm_backward into a copy of dout_old; dout_old null or undefined: = J^T dy)
// in x's dtype, then mix_backward(dout, terms, grads). x is the mix's output (the norm's input), dy the norm
// output's gradient, rstd the norm's. dout_old (x's gradient gathered so far) is read, not written: the caller's
// x gradient never holds dout, which nothing reads after the mix's backward. A term's dx may be dout_old itself
// (mix_backward's rule for dout). Results are those of the two ops bit for bit; the CUDA path forms dout in the
// registers of mix_backward v3's one-pass kernel when that kernel takes the call, saving the write and read-back
// of dout (kernels/cuda/NOTES.md), else runs the two ops.
void mix_rmsnorm_backward(const Tensor* dout_old, const Tensor& dy, const Tensor& x, const Tensor& rstd,
                          std::span<const MixTerm> terms, std::span<const MixGrad> grads);

// §2.9 steps 2 and 10: W_out = bf16(bf16(λ)·W) (one scalar term). dW += bf16(λ)·dW_out, dλ += Σ dW_out·W.
inline void scale_weight_forward(const Tensor& w, const Tensor& lambda, Tensor& w_out) {
  const MixTerm term{w, Coef::of_scalar(lambda)};
  mix_forward({&term, 1}, w_out);
}
inline void scale_weight_backward(const Tensor& dw_out, const Tensor& w, const Tensor& lambda, Tensor& dw,
                                  Tensor& dlambda) {
  const MixTerm term{w, Coef::of_scalar(lambda)};
  const MixGrad grad{.dx = dw, .dscalar = dlambda};
  mix_backward(dw_out, {&term, 1}, {&grad, 1});
}

namespace cpu {
void mix_forward(std::span<const MixTerm> terms, Tensor& out);
void mix_backward(const Tensor& dout, std::span<const MixTerm> terms, std::span<const MixGrad> grads);
void mix_rmsnorm_forward(std::span<const MixTerm> terms, Tensor& out, Tensor& y, Tensor& rstd, float eps);
void mix_rmsnorm_backward(const Tensor* dout_old, const Tensor& dy, const Tensor& x, const Tensor& rstd,
                          std::span<const MixTerm> terms, std::span<const MixGrad> grads);
}  // namespace cpu
namespace cuda {
void mix_forward(std::span<const MixTerm> terms, Tensor& out);
void mix_backward(const Tensor& dout, std::span<const MixTerm> terms, std::span<const MixGrad> grads);
void mix_rmsnorm_forward(std::span<const MixTerm> terms, Tensor& out, Tensor& y, Tensor& rstd, float eps);
void mix_rmsnorm_backward(const Tensor* dout_old, const Tensor& dy, const Tensor& x, const Tensor& rstd,
                          std::span<const MixTerm> terms, std::span<const MixGrad> grads);
}  // namespace cuda

}  // namespace gpt
