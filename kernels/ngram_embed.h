#pragma once
// Hashed n-gram embedding with the sign pool (RECIPE §S.2):
//
//   Ng_t = round(NG[b_t] ⊙ pool[sb_t] + NG[c_t] ⊙ pool[st_t])
//
// the two products and their sum in the accumulation type (fp32; f64 for f64 tensors), one rounding to the output
// dtype. `rows` and `sign_rows` are i32 [2T] (bigram channel then trigram channel, as the loader lays them out);
// `rows` index `table` directly, so the caller passes either the whole table with global ids or a cache of rows
// with cache positions. The pool holds ±1, so every product is exact.
//
// Backward ADDS per-row sums: for every row r, row_grad[r] += Σ_{j: rows[j] = r} dout[j mod T] ⊙ pool[sign_rows[j]],
// summed in the accumulation type in increasing j (bigram entries before trigram entries) and added once, so the
// result does not depend on threading. row_grad has the accumulation dtype of dout (f32 for bf16/f32, f64 for f64):
// the caller decides how the cycle's sums are rounded (trainer/model/ngram_table.h).
//
// table: [R, d]; pool: [P, d] (table dtype); rows, sign_rows: i32 [2T]; out, dout: [T, d] (table dtype);
// row_grad: [R', d]. All tensors on one device. The CUDA kernels (kernels/cuda/ngram_embed.cu) follow the same
// orders and rounding points, so they give the CPU reference's bits in every dtype. Ids outside their table are
// refused by the CPU reference; the CUDA forward writes NaN for such a token and the backward skips the entry.
#include "kernels/tensor.h"

namespace gpt {

void ngram_embed_forward(const Tensor& table, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                         Tensor& out);
void ngram_embed_backward(const Tensor& dout, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                          Tensor& row_grad);

namespace cpu {
void ngram_embed_forward(const Tensor& table, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                         Tensor& out);
void ngram_embed_backward(const Tensor& dout, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                          Tensor& row_grad);
}  // namespace cpu

namespace cuda {
void ngram_embed_forward(const Tensor& table, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                         Tensor& out);
void ngram_embed_backward(const Tensor& dout, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                          Tensor& row_grad);
}  // namespace cuda

}  // namespace gpt
