#pragma once
// Bigram embedding with the sign trick (RECIPE §2.5 step 4, §2.5.2):
//
//   Bg_t = bigram_embed[h_t] ⊙ sign_table[σ_t]
//
// Row ids h_t and sign rows σ_t are computed on the host by the data loader (int32 [T]). The sign table holds ±1,
// so the product is exact in any dtype. Backward (ADDS): d bigram_embed[h_t] += dBg_t ⊙ sign_table[σ_t], summed
// per row in the accumulation type in token order and added once (deterministic, as embedding_backward). The
// sign table is a buffer and gets no gradient.
//
// embed: [rows, d]; sign: [sign_rows, d]; ids, sign_ids: i32 [T]; out, dout: [T, d]; all floating tensors share
// one dtype.
#include "kernels/tensor.h"

namespace gpt {

void bigram_forward(const Tensor& embed, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids, Tensor& out);
void bigram_backward(const Tensor& dout, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids, Tensor& dembed);

namespace cpu {
void bigram_forward(const Tensor& embed, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids, Tensor& out);
void bigram_backward(const Tensor& dout, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids, Tensor& dembed);
}  // namespace cpu
namespace cuda {
void bigram_forward(const Tensor& embed, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids, Tensor& out);
void bigram_backward(const Tensor& dout, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids, Tensor& dembed);
}  // namespace cuda

}  // namespace gpt
