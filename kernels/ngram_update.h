#pragma once
// The hashed n-gram table's cycle and event ops (RECIPE §S.2), run on the table's device; the host keeps only the
// row bookkeeping (which cycle slot holds which row, trainer/model/ngram_table.h).
//
// Cycle gradient: `cycle` [C, d] holds one pending per-row sum per slot in the accumulation dtype (f32 for bf16 and
// f32 tables, f64 for f64 tables).
//   ngram_cycle_add     cycle[slots[u]] = R(cycle[slots[u]] + sums[u]) for every u: one addition in the
//                       accumulation type, then R = rounding to the nearest fp16 value (`round_fp16`, f32 cycles
//                       only: the fp16 cycle sums of a bf16 table) or none. sums [n, d] (cycle dtype), slots i32 [n],
//                       distinct, in [0, C).
//   ngram_cycle_gather  out[i] = round(cycle[slots[i]]) to out's dtype (the table dtype the sums are exchanged in);
//                       out [n, d], slots i32 [n] in [0, C).
//
// Sparse Adam at event e (e = 1, 2, …) for the distinct local rows `rows` i32 [n] with merged gradients
// grad [n, d] (table dtype), on table [R, d], second_moment f32 [R], stamps i64 [R] (the event up to which each
// row's v has been decayed) and beta2_history f32 [≥ e] (β2 of event k at k − 1, each rounded to fp32 once):
//   v ← owed(v) (for k = stamp+1 .. e−1, in order: v ← β2_k·v, one fp32 multiply each);
//   v ← β·v + (1−β)·mean(g²)    β = fp32(β2), 1−β = fp32(1 − β2), mean(g²) summed over c in order in the
//                               accumulation type, divided by d, then rounded to fp32; stamp ← e;
//   u = g/(√v + eps)·step_scale; u ← u + [u·p > 0]·decay_scale·p; p ← round(p − u)
// with √v, eps, step_scale = lr·√(1−β2^e) and decay_scale = lr²·wd·wd_mul in the accumulation type (step_scale and
// decay_scale computed by the caller in f64). Each operation is rounded on its own (never fused), so the CUDA kernel
// gives the CPU reference's bits. Untouched rows are left as they are: the replay of what they owe is bitwise equal
// to decaying every row at every event, which
//   ngram_decay_untouched  for every row with stamp ≠ e: v ← fp32(β2)·v, stamp ← e
// does (the eager form, for tests of that equality).
#include <cstdint>

#include "kernels/tensor.h"

namespace gpt {

struct NgramAdamStep {
  int64_t event = 0;  // e, the 1-based count of events including this one
  double beta2 = 0;   // β2 of this event
  double step_scale = 0, decay_scale = 0, eps = 0;
};

void ngram_cycle_add(Tensor& cycle, const Tensor& slots, const Tensor& sums, bool round_fp16);
void ngram_cycle_gather(const Tensor& cycle, const Tensor& slots, Tensor& out);
void ngram_sparse_adam(Tensor& table, Tensor& second_moment, Tensor& stamps, const Tensor& beta2_history,
                       const Tensor& rows, const Tensor& grad, const NgramAdamStep& step);
void ngram_decay_untouched(Tensor& second_moment, Tensor& stamps, double beta2, int64_t event);

// Rounds to the nearest fp16 value (ties to even; overflow to ±inf, subnormals kept), returned as fp32.
float round_to_fp16(float x);

namespace cpu {
void ngram_cycle_add(Tensor& cycle, const Tensor& slots, const Tensor& sums, bool round_fp16);
void ngram_cycle_gather(const Tensor& cycle, const Tensor& slots, Tensor& out);
void ngram_sparse_adam(Tensor& table, Tensor& second_moment, Tensor& stamps, const Tensor& beta2_history,
                       const Tensor& rows, const Tensor& grad, const NgramAdamStep& step);
void ngram_decay_untouched(Tensor& second_moment, Tensor& stamps, double beta2, int64_t event);
}  // namespace cpu

namespace cuda {
void ngram_cycle_add(Tensor& cycle, const Tensor& slots, const Tensor& sums, bool round_fp16);
void ngram_cycle_gather(const Tensor& cycle, const Tensor& slots, Tensor& out);
void ngram_sparse_adam(Tensor& table, Tensor& second_moment, Tensor& stamps, const Tensor& beta2_history,
                       const Tensor& rows, const Tensor& grad, const NgramAdamStep& step);
void ngram_decay_untouched(Tensor& second_moment, Tensor& stamps, double beta2, int64_t event);
}  // namespace cuda

}  // namespace gpt
