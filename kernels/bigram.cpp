#include "kernels/bigram.h"

#include "kernels/dispatch.h"

namespace gpt {

namespace {

void check_args(const Tensor& table, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids,
                const Tensor& rows_tensor, const char* op) {
  GPT_CHECK(table.ndim() == 2 && is_floating(table.dtype()), op, ": bigram table must be a floating [rows, d], got ",
            table.describe());
  const int64_t d = table.size(1);
  GPT_CHECK(sign.ndim() == 2 && sign.size(1) == d, op, ": sign table must be [rows, ", d, "], got ", sign.describe());
  check_dtype(sign, table.dtype(), op);
  GPT_CHECK(ids.ndim() == 1, op, ": ids must be [T], got ", ids.describe());
  check_dtype(ids, DType::i32, op);
  check_shape(sign_ids, ids.shape(), op);
  check_dtype(sign_ids, DType::i32, op);
  check_shape(rows_tensor, {ids.size(0), d}, op);
  check_dtype(rows_tensor, table.dtype(), op);
  check_same_device({&table, &sign, &ids, &sign_ids, &rows_tensor}, op);
}

}  // namespace

void bigram_forward(const Tensor& embed, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids, Tensor& out) {
  check_args(embed, sign, ids, sign_ids, out, "bigram_forward");
  GPT_BACKEND_CALL(embed.device(), bigram_forward, embed, sign, ids, sign_ids, out);
}

void bigram_backward(const Tensor& dout, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids,
                     Tensor& dembed) {
  check_args(dembed, sign, ids, sign_ids, dout, "bigram_backward");
  GPT_BACKEND_CALL(dembed.device(), bigram_backward, dout, sign, ids, sign_ids, dembed);
}

}  // namespace gpt
