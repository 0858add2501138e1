#pragma once
// Row gathers from embedding tables (RECIPE §2.5 steps 1 and 5) and their deterministic scatter-add backward.
//
//   out[t, :] = table[ids[t], :]            (ids int32, 0 <= ids[t] < rows)
//   dtable[ids[t], :] += dout[t, :]         (backward, ADDS)
//
// The backward sums every token that hits one row in the accumulation type (fp32, f64 for f64), in increasing
// token order, and adds that sum to dtable once: the result is deterministic and rounded once per row per call
// (no per-token bf16 rounding, no atomics-order dependence). Rows that no id hits are left untouched.
//
// Value-embedding planes (§2.5 step 5): `ve_p = value_embeds[p·V + x_t]` is the same gather on the leading-row
// slice [p·V, (p+1)·V) of the table; `value_embedding_forward/backward` take the plane index and check that every
// id lies inside the plane.
#include "kernels/tensor.h"

namespace gpt {

inline constexpr int64_t kPaddedVocab = 50304;  // V of §0.3

// table: [rows, d] (f64, f32 or bf16). ids: i32 of any shape [N...]. out: [N..., d], table's dtype.
void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out);
// dout: [N..., d]; dtable: [rows, d]; both of the table's dtype. dtable[ids[t]] += dout[t].
void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable);

// Plane p of a stacked table [planes·vocab, d]: ids index rows [p·vocab, (p+1)·vocab).
void value_embedding_forward(const Tensor& table, const Tensor& ids, int64_t plane, Tensor& out,
                             int64_t vocab = kPaddedVocab);
void value_embedding_backward(const Tensor& dout, const Tensor& ids, int64_t plane, Tensor& dtable,
                              int64_t vocab = kPaddedVocab);

namespace cpu {
void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out);
void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable);
}  // namespace cpu
namespace cuda {
void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out);
void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable);
}  // namespace cuda

}  // namespace gpt
