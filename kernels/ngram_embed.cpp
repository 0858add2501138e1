#include "kernels/ngram_embed.h"

#include "base/check.h"
#include "kernels/dispatch.h"

namespace gpt {

namespace {

void check_args(const Tensor& values, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                const Tensor& table_like, const char* op) {
  GPT_CHECK(values.ndim() == 2 && is_floating(values.dtype()), op, ": expected a floating [T, d] tensor, got ",
            values.describe());
  const int64_t d = values.size(1);
  GPT_CHECK(table_like.ndim() == 2 && table_like.size(1) == d, op, ": table must be [rows, ", d, "], got ",
            table_like.describe());
  GPT_CHECK(pool.ndim() == 2 && pool.size(1) == d, op, ": sign pool must be [rows, ", d, "], got ", pool.describe());
  check_dtype(pool, values.dtype(), op);
  check_shape(rows, {2 * values.size(0)}, op);
  check_dtype(rows, DType::i32, op);
  check_shape(sign_rows, {2 * values.size(0)}, op);
  check_dtype(sign_rows, DType::i32, op);
  check_same_device({&values, &pool, &rows, &sign_rows, &table_like}, op);
}

}  // namespace

void ngram_embed_forward(const Tensor& table, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                         Tensor& out) {
  check_args(out, pool, rows, sign_rows, table, "ngram_embed_forward");
  check_dtype(table, out.dtype(), "ngram_embed_forward");
  GPT_BACKEND_CALL(out.device(), ngram_embed_forward, table, pool, rows, sign_rows, out);
}

void ngram_embed_backward(const Tensor& dout, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                          Tensor& row_grad) {
  check_args(dout, pool, rows, sign_rows, row_grad, "ngram_embed_backward");
  check_dtype(row_grad, stat_dtype(dout.dtype()), "ngram_embed_backward: row_grad");
  GPT_BACKEND_CALL(dout.device(), ngram_embed_backward, dout, pool, rows, sign_rows, row_grad);
}

}  // namespace gpt
