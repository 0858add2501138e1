#include "kernels/embedding.h"

#include "kernels/dispatch.h"

namespace gpt {

namespace {

Shape gathered_shape(const Tensor& ids, int64_t d) {
  Shape s = ids.shape();
  s.push_back(d);
  return s;
}

void check_table(const Tensor& table, const char* what) {
  GPT_CHECK(table.ndim() == 2, what, ": expected a 2-D table [rows, d], got ", table.describe());
  GPT_CHECK(is_floating(table.dtype()), what, ": expected a floating table, got ", table.describe());
}

Tensor plane_of(const Tensor& table, int64_t plane, int64_t vocab, const char* what) {
  GPT_CHECK(vocab > 0 && plane >= 0 && (plane + 1) * vocab <= table.size(0), what, ": plane ", plane, " of ", vocab,
            " rows does not fit in ", table.describe());
  return table.slice(plane * vocab, (plane + 1) * vocab);
}

}  // namespace

void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  check_table(table, "embedding_forward: table");
  check_dtype(ids, DType::i32, "embedding_forward: ids");
  check_shape(out, gathered_shape(ids, table.size(1)), "embedding_forward: out");
  check_dtype(out, table.dtype(), "embedding_forward: out");
  check_same_device({&table, &ids, &out}, "embedding_forward");
  GPT_BACKEND_CALL(table.device(), embedding_forward, table, ids, out);
}

void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  check_table(dtable, "embedding_backward: dtable");
  check_dtype(ids, DType::i32, "embedding_backward: ids");
  check_shape(dout, gathered_shape(ids, dtable.size(1)), "embedding_backward: dout");
  check_dtype(dout, dtable.dtype(), "embedding_backward: dout");
  check_same_device({&dout, &ids, &dtable}, "embedding_backward");
  GPT_BACKEND_CALL(dtable.device(), embedding_backward, dout, ids, dtable);
}

void value_embedding_forward(const Tensor& table, const Tensor& ids, int64_t plane, Tensor& out, int64_t vocab) {
  check_table(table, "value_embedding_forward: table");
  embedding_forward(plane_of(table, plane, vocab, "value_embedding_forward"), ids, out);
}

void value_embedding_backward(const Tensor& dout, const Tensor& ids, int64_t plane, Tensor& dtable, int64_t vocab) {
  check_table(dtable, "value_embedding_backward: dtable");
  Tensor rows = plane_of(dtable, plane, vocab, "value_embedding_backward");
  embedding_backward(dout, ids, rows);
}

}  // namespace gpt
