#pragma once
// NorMuon with Polar Express (RECIPE §4.3) for a stack of independent matrices (a bank, or a rank's chunk of one).
//
// For each matrix (rows m × cols n) with gradient G and momentum μ:
//   1. Mb ← μ·Mb + (1−μ)·G;  G̃ = (1−μ)·G + μ·Mb                               (normuon_momentum)
//   2. X = W(G̃);  X ← W(X / W(W(‖X‖_F·1.02) + 1e-6))                           (normuon_normalize)
//   3. five Polar Express steps through gemm, results in W:                     (polar_express)
//        m ≤ n: A = XXᵀ, B = c·A·A + b·A, X ← a·X + B·X
//        m > n: A = XᵀX, B = c·A·A + b·A, X ← a·X + X·B
//   4. low-rank variance reduction with state S and update with cautious decay    (normuon_apply)
//        m ≥ n: r_i = mean_j X_ij² (S is m×1), q = n; else r_j = mean_i X_ij² (S is 1×n), q = m
//        ν = sqrt(q·Σr); S ← β2·S + (1−β2)·r; g = 1/sqrt(max(S, 1e-10)); ν' = sqrt(q·Σ r·g²)
//        U = W(X ⊙ W(g·ν/max(ν', 1e-10)))
//        P ← P − [U⊙P ≥ 0]·P·(wd·lr·lr_eff) − U·lr_eff,  lr_eff = lr·shape_mult·mat_mult,
//        shape_mult = sqrt(max(1, m/n)), mat_mult = odd_matrix_lr_mul for odd global matrix indices, else 1.
// W(·) is rounding to the work dtype = the parameter dtype (bf16 in training; identity for f32/f64 tensors, which
// give the exact math of the tests). Norms and statistics accumulate in fp32 (double for f64).
// For bf16 parameters P is the fp32 master whose upper 16 bits are the bf16 weight and whose lower 16 bits are
// the uint16 mantissa state; the new master is stored by truncation (upper bits → weight, lower → mantissa).
// For f32/f64 parameters the parameter is its own master and no mantissa is used.
#include <bit>
#include <cstdint>

#include "kernels/tensor.h"

namespace gpt {

struct NorMuonArgs {
  double momentum = 0.95;  // μ(s)
  double lr = 0;           // base_lr·η(s)
  double weight_decay = 1.2;
  double beta2 = 0.9;            // decay of the second-moment state S
  double odd_matrix_lr_mul = 1;  // mat_mult of odd global matrix indices (2 for mlp_bank's W2)
  int64_t first_matrix = 0;      // global index of the stack's first matrix (a rank's chunk offset)
};

// Per-matrix optimizer state; all zero at start and at reset.
struct NorMuonState {
  Tensor momentum;       // stat_dtype(param) [count, rows, cols]
  Tensor second_moment;  // stat_dtype(param) [count, rows] if rows >= cols else [count, cols]
  Tensor mantissa;       // u16 [count, rows, cols] for bf16 params; undefined otherwise

  static NorMuonState zeros(const Tensor& param);
  void zero_();
};

// The Polar Express coefficients (a, b, c) of §4.3, iteration order.
inline constexpr double kPolarExpress[5][3] = {
    {8.156554524902461, -22.48329292557795, 15.878769915207462},
    {4.042929935166739, -2.808917465908714, 0.5000178451051316},
    {3.8916678022926607, -2.772484153217685, 0.5060648178503393},
    {3.285753657755655, -2.3681294933425376, 0.46449024233003106},
    {2.3465413258596377, -1.7097828382687081, 0.42323551169305323},
};

// fp32 master ↔ (bf16 weight, mantissa): the weight is the upper half of the bits (truncation, not rounding).
inline float join_master(bf16 weight, uint16_t mantissa) {
  return std::bit_cast<float>((static_cast<uint32_t>(weight.bits) << 16) | mantissa);
}
inline void split_master(float master, bf16& weight, uint16_t& mantissa) {
  const uint32_t bits = std::bit_cast<uint32_t>(master);
  weight = bf16::from_bits(static_cast<uint16_t>(bits >> 16));
  mantissa = static_cast<uint16_t>(bits & 0xffffu);
}

// param: [count, rows, cols] (f64, f32 or bf16); grad: same shape and dtype. One full NorMuon step.
void normuon_update(Tensor& param, const Tensor& grad, NorMuonState& state, const NorMuonArgs& args);

// The building blocks, public for tests and for the CUDA backend.
void normuon_momentum(const Tensor& grad, Tensor& momentum, Tensor& x, double mu);
void normuon_normalize(Tensor& x);
void polar_express(Tensor& x);  // x: [count, rows, cols], in place, through gemm
// The iteration of step 3 for any list of `count` coefficient triples (a, b, c), in order (polar_express runs it
// with kPolarExpress). `gram`: [count, k, k] with k = min(rows, cols), in x's dtype; when `gram_given`, it already
// holds the first Gram matrix (ANVIL's normalised one), else every Gram is computed from X. It is overwritten.
void gram_polynomial_maps(Tensor& x, const double (*coefficients)[3], int count, Tensor& gram, bool gram_given);
// A = XXᵀ (rows ≤ cols) or XᵀX (rows > cols) for every matrix of x, through gemm, rounded to gram's dtype.
void short_side_gram(const Tensor& x, Tensor& gram);
void normuon_apply(const Tensor& x, Tensor& second_moment, Tensor& param, Tensor& mantissa, const NorMuonArgs& args);

namespace cpu {
void normuon_momentum(const Tensor& grad, Tensor& momentum, Tensor& x, double mu);
void normuon_normalize(Tensor& x);
void normuon_apply(const Tensor& x, Tensor& second_moment, Tensor& param, Tensor& mantissa, const NorMuonArgs& args);
}  // namespace cpu
namespace cuda {
void normuon_momentum(const Tensor& grad, Tensor& momentum, Tensor& x, double mu);
void normuon_normalize(Tensor& x);
void normuon_apply(const Tensor& x, Tensor& second_moment, Tensor& param, Tensor& mantissa, const NorMuonArgs& args);
}  // namespace cuda

}  // namespace gpt
