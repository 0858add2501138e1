#include "kernels/column_select.h"

#include "kernels/dispatch.h"

namespace gpt {

namespace {

void check_args(const Tensor& table, const Tensor& columns, const Tensor& narrow, const char* op) {
  GPT_CHECK(table.ndim() == 2 && is_floating(table.dtype()), op, ": table must be a floating [d, V], got ",
            table.describe());
  GPT_CHECK(columns.ndim() == 1, op, ": columns must be [P], got ", columns.describe());
  check_dtype(columns, DType::i64, op);
  check_shape(narrow, {table.size(0), columns.size(0)}, op);
  check_dtype(narrow, table.dtype(), op);
  check_same_device({&table, &columns, &narrow}, op);
}

}  // namespace

void column_gather(const Tensor& table, const Tensor& columns, Tensor& out) {
  check_args(table, columns, out, "column_gather");
  GPT_BACKEND_CALL(table.device(), column_gather, table, columns, out);
}

void column_scatter_add(const Tensor& src, const Tensor& columns, Tensor& table) {
  check_args(table, columns, src, "column_scatter_add");
  GPT_BACKEND_CALL(table.device(), column_scatter_add, src, columns, table);
}

}  // namespace gpt
