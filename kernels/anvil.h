#pragma once
// ANVIL, the bank optimizer of the `ext` profile (RECIPE §S.8), for a stack of independent matrices (a bank, or a
// rank's chunk of one). It shares NorMuon's equalizer, learning-rate multipliers and mantissa tracking
// (kernels/normuon.h) and differs in the momentum, the orthogonalisation and the decay gate.
//
// For each matrix (rows m × cols n) with gradient G at step s of N:
//   1. rails (anvil_rails): β_r(s) = 0.85 + 0.08·s/warmup (s < warmup), 0.93 − 0.08·(s − (N−taper))/taper
//      (s > N − taper), else 0.93; s < fast_switch: β_f = β_r, w = 1; else β_f = 0.85, w = fast_weight.
//   2. v_f ← β_f·v_f + (1−β_f)·G;  v_s ← 0.98·v_s + 0.02·G  (state dtype, both from step 0);
//      b = w·v_f + (1−w)·v_s;  X = W((1−μ)·G + μ·b), μ = β_r(s)                           (anvil_momentum)
//   3. A = W(XXᵀ) (m ≤ n) or W(XᵀX) (m > n) through gemm; t = W(Σ_i A_ii); δ = W(W(W(√t)·1.05) + 1e-6);
//      X ← W(X/δ), A ← W(A/W(δ·δ))                                                         (anvil_gram_normalize)
//   4. the six maps kAnvilMaps through gemm, the first on the normalised A, later ones on A recomputed from X:
//      B = c·A·A + b·A, X ← a·X + B·X (X·B for m > n)                                        (gram_polynomial_maps)
//   5–6. the equalizer of §4.3 step 4 with β2, then P ← P − [v_s⊙P ≥ 0]·P·(wd·lr·lr_eff) − U·lr_eff with the
//      master, lr_eff = lr·shape_mult·mat_mult and the mantissa tracking of kernels/normuon.h     (anvil_apply)
// W(·) is rounding to the parameter dtype (bf16 in training; identity for f32/f64, the exact math of the tests).
// The roundings of step 3 mirror step 2 of NorMuon: one per elementwise op, sums accumulated in double. The
// gate of step 6 compares the slow rail with the fp32 master (the bf16 weight joined with its mantissa).
// Both backends (kernels/cpu/anvil.cpp, kernels/cuda/anvil.cu): the CUDA momentum and trace scaling give the CPU's
// bits; its update sums the equalizer's statistics in another fixed order (kernels/cuda/normuon.cu).
#include <cstdint>

#include "kernels/normuon.h"
#include "kernels/tensor.h"

namespace gpt {

// The fixed constants of §S.8 (the recipe carries the step counts and the fast weight).
inline constexpr double kAnvilRailStart = 0.85;  // β_r at step 0
inline constexpr double kAnvilRailPeak = 0.93;   // β_r between warmup and taper
inline constexpr double kAnvilFastBeta = 0.85;   // β_f from fast_switch on
inline constexpr double kAnvilSlowBeta = 0.98;   // β_s
inline constexpr double kAnvilTraceMargin = 1.05;

// The six maps (a, b, c) of §S.8, in order.
inline constexpr double kAnvilMaps[6][3] = {
    {3.923798038567, -6.095026865488, 3.905234618423}, {3.278126713798, -3.328923386476, 0.989127286973},
    {3.505298394150, -5.137358782410, 1.968325560615}, {2.815058591845, -3.685181239622, 1.417196497642},
    {2.245503932403, -2.443826979899, 0.963091710461}, {2.256537145403, -2.166840097229, 0.929501253245},
};

struct AnvilArgs {
  int64_t step = 0;              // s, 0 ≤ s < total_steps
  int64_t total_steps = 0;       // N
  double lr = 0;                 // bank_lr·η(s)
  double weight_decay = 2.25;    // recipe extensions.anvil_wd
  double beta2 = 0.9;            // equalizer decay (recipe optimizer.bank_beta2)
  int64_t rail_warmup = 240;     // extensions.anvil_rail_warmup
  int64_t fast_switch = 514;     // extensions.anvil_fast_switch
  int64_t rail_taper = 50;       // extensions.anvil_rail_taper
  double fast_weight = 0.4385;   // extensions.anvil_fast_weight (w from fast_switch on)
  double odd_matrix_lr_mul = 1;  // mat_mult of odd global matrix indices (2 for mlp_bank's W2)
  int64_t first_matrix = 0;      // global index of the stack's first matrix (a rank's chunk offset)
};

// The step's rail parameters: μ = β_r(s), β_f and w (step 1 above).
struct AnvilRails {
  double rail = 0;         // β_r(s), also the Nesterov weight μ
  double fast_beta = 0;    // β_f
  double fast_weight = 0;  // w
};
AnvilRails anvil_rails(const AnvilArgs& args);

// Per-matrix optimizer state; all zero at start and at reset.
struct AnvilState {
  Tensor fast_rail;      // stat_dtype(param) [count, rows, cols]   v_f
  Tensor slow_rail;      // stat_dtype(param) [count, rows, cols]   v_s
  Tensor second_moment;  // stat_dtype(param) [count, rows] if rows >= cols else [count, cols]
  Tensor mantissa;       // u16 [count, rows, cols] for bf16 params; undefined otherwise

  static AnvilState zeros(const Tensor& param);
  void zero_();
};

// param: [count, rows, cols] (f64, f32 or bf16); grad: same shape and dtype. One full ANVIL step.
void anvil_update(Tensor& param, const Tensor& grad, AnvilState& state, const AnvilArgs& args);

// The building blocks, public for tests and for the CUDA backend.
void anvil_momentum(const Tensor& grad, Tensor& fast_rail, Tensor& slow_rail, Tensor& x, const AnvilRails& rails);
void anvil_gram_normalize(Tensor& x, Tensor& gram);  // gram: [count, k, k], k = min(rows, cols), x's dtype
void anvil_apply(const Tensor& x, Tensor& second_moment, const Tensor& slow_rail, Tensor& param, Tensor& mantissa,
                 const AnvilArgs& args);

// The NorMuon arguments of steps 5–6 (equalizer and update) for ANVIL's: its decay, β2, lr and matrix multipliers.
NorMuonArgs anvil_equalizer_args(const AnvilArgs& args);

namespace cpu {
void anvil_momentum(const Tensor& grad, Tensor& fast_rail, Tensor& slow_rail, Tensor& x, const AnvilRails& rails);
void anvil_scale_by_trace(Tensor& x, Tensor& gram);  // step 3 after the Gram product
void anvil_apply(const Tensor& x, Tensor& second_moment, const Tensor& slow_rail, Tensor& param, Tensor& mantissa,
                 const AnvilArgs& args);
}  // namespace cpu
namespace cuda {
void anvil_momentum(const Tensor& grad, Tensor& fast_rail, Tensor& slow_rail, Tensor& x, const AnvilRails& rails);
void anvil_scale_by_trace(Tensor& x, Tensor& gram);
void anvil_apply(const Tensor& x, Tensor& second_moment, const Tensor& slow_rail, Tensor& param, Tensor& mantissa,
                 const AnvilArgs& args);
}  // namespace cuda

}  // namespace gpt
