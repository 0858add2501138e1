#pragma once
// The ops of kernels/ as the model uses them: each wrapper runs the op's forward on Var values and records on the
// tape a closure that runs the op's backward into the Vars' gradient slots. Nothing here does math itself, so the
// model stays backend-agnostic (CPU reference now, CUDA later) and every piece is the tested op.
//
// Conventions: every output is a fresh tensor (no in-place forwards, so backward closures can read their inputs);
// a closure whose output never received a gradient does nothing; inputs that do not require a gradient (token
// tables, constants) are skipped. While the tape is disabled (validation) nothing is recorded and no gradient
// buffer is allocated.
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dc_attention.h"
#include "kernels/elementwise.h"
#include "kernels/fp8_linear.h"
#include "kernels/rotary.h"
#include "trainer/model/ngram_table.h"
#include "trainer/model/tape.h"

namespace gpt::taped {

// A parameter (or a leading-dimension slice of one) whose gradient lives in `grad` (owned by a ParameterSet).
inline Var parameter(const Tensor& value, const Tensor& grad) { return Var::with_gradient_buffer(value, grad); }
inline Var constant(const Tensor& value) { return Var(value, /*requires_grad=*/false); }

// Reshape sharing value and gradient storage; the gradient is allocated by whichever of x and the view is written
// first (Var::reshaped), so a first writer that overwrites through the view saves the zero fill.
Var view(Tape& tape, Var& x, const Shape& shape);
// Rows [begin, end) of x (value and gradient slices).
Var slice(Tape& tape, Var& x, int64_t begin, int64_t end);

Var rmsnorm(Tape& tape, Var x);

// The forward results of norm(x) made by the kernel that made x (mix_normed), waiting for the rmsnorm call that
// uses them: that call records the norm's backward where it always did, so the tape's order (and the order in which
// gradients add up) is the same as without the fusion. Empty when nothing waits.
// When that rmsnorm is recorded right after the mix (no other reader of x in between, so nothing adds to x's
// gradient between the two backward steps), its backward is folded into the mix's (mix_rmsnorm_backward, one kernel
// on CUDA): the norm's step hands its output gradient to the mix's step, which forms x's full gradient without
// storing it. SPEEDRUN_MIX_NORM_BACKWARD=0 (read once) keeps the two steps apart (the same bits, one more full-row
// pass each way).
struct FoldedNorm;  // taped_ops.cpp: what the two steps share
struct PendingNorm {
  Tensor of;  // x's value
  Tensor y, rstd;
  std::shared_ptr<FoldedNorm> fold{};  // the mix's end of a fold; null: no fold
  size_t tape_steps_after_mix = 0;     // the tape's size once the mix was recorded
  bool waiting() const { return of.defined(); }
};
// rmsnorm(x) from `pending` when it holds the norm of x (then empties it), else computed here.
Var rmsnorm(Tape& tape, Var x, PendingNorm& pending);
// y = x·wᵀ (w: [out, in], the bank layout) and y = x·w (w: [in, out], lm_head / W2 layout).
Var linear(Tape& tape, Var x, Var w);
Var matmul(Tape& tape, Var x, Var w);
Var gelu(Tape& tape, Var x);
Var bias_add(Tape& tape, Var x, Var bias);

// One term of a residual mix (kernels/elementwise.h): coefficient = S(scalar)·(offset + lanes[t, lane + group]).
struct Term {
  Var x;
  Var scalar{};  // undefined value: S = 1
  ScalarFn fn = ScalarFn::identity;
  Var lanes{};  // undefined value: L = 1
  int64_t lane = 0;
  int64_t groups = 1;
  float offset = 0.0f;

  Term scaled(Var s) const;
  Term sigmoid_scaled(Var s) const;
  Term times_lane(Var g, int64_t lane_index, int64_t n_groups = 1) const;
  Term plus(float constant) const;
};
inline Term term(Var x) { return Term{.x = x}; }
Var mix(Tape& tape, const std::vector<Term>& terms);
// mix(terms) whose output a later rmsnorm reads: the norm's forward is made with the mix (mix_rmsnorm_forward, one
// kernel on CUDA) into `pending`, which must be empty. SPEEDRUN_MIX_NORM=0 (read once) makes it a plain mix.
Var mix_normed(Tape& tape, const std::vector<Term>& terms, PendingNorm& pending);

namespace detail {
// For tests that compare the backward with and without the norm folded into its mix in one process: what
// SPEEDRUN_MIX_NORM_BACKWARD would choose, for the mix_normed calls made while it lives.
class ScopedMixNormBackwardFold {
 public:
  explicit ScopedMixNormBackwardFold(bool on);
  ~ScopedMixNormBackwardFold();
  ScopedMixNormBackwardFold(const ScopedMixNormBackwardFold&) = delete;
  ScopedMixNormBackwardFold& operator=(const ScopedMixNormBackwardFold&) = delete;

 private:
  int previous_;
};
}  // namespace detail

// W_out = bf16(bf16(λ)·W).
Var scale_weight(Tape& tape, Var w, Var lambda);

Var embedding(Tape& tape, Var table, const Tensor& ids);
Var value_embedding(Tape& tape, Var table, const Tensor& ids, int64_t plane, int64_t vocab);
Var bigram(Tape& tape, Var table, const Tensor& sign_table, const Tensor& ids, const Tensor& sign_ids);
// §S.2 Ng of the microbatch from the hashed n-gram table; the backward adds dNg to the table's pending cycle
// (NgramTable::accumulate_backward). The table is not a parameter: `table` must outlive the tape's replay.
Var ngram_embed(Tape& tape, NgramTable& table, const Microbatch& batch);
Var smear(Tape& tape, Var e, Var gate, Var lambda);

// q/k/v tensors are [T, H, D].
// QK-norm then rotary (§2.9 steps 3–4) in one op: kernels/qk_norm_rotary.h.
Var qk_norm_rotary(Tape& tape, Var x, const Tensor& cos, const Tensor& sin, RotaryLayout layout);
Var key_offset(Tape& tape, Var k);
Var value_gate(Tape& tape, Var v, Var u, Var ve, Var gate);
// Core attention; paired = the (2T, H/2, D) reinterpretation with doubled cu_seqlens (§2.9 step 7).
Var attention(Tape& tape, Var q, Var k, Var v, const Tensor& cu_seqlens, const Tensor& cu_seqlens_doubled, bool paired,
              int64_t window, float scale);
Var dc_attention(Tape& tape, Var q, Var k, Var v, const Tensor& cu_seqlens, Var gates, DcLanes lanes, Var y_core,
                 float scale);
Var xsa(Tape& tape, Var y, Var v, Var gates, int64_t first_lane);
Var head_gate(Tape& tape, Var y, Var gates, int64_t first_lane);

// MLP_i(u) = relu(u·W1ᵀ)²·W2 (§2.10); with fp8_state the forward uses the §7.2 FP8 products, the backward is
// always the plain product with the stored weights.
Var mlp(Tape& tape, Var u, Var w1, Var w2, MlpFp8State* fp8_state, const MlpFp8Weights* fp8_weights = nullptr);

}  // namespace gpt::taped
