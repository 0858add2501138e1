#include "kernels/transpose.h"

#include "kernels/dispatch.h"

namespace gpt {

namespace {
void check_transpose(const Tensor& src, const Tensor& dst, const char* op) {
  GPT_CHECK(src.ndim() == 2, op, ": src must be 2-D, got ", src.describe());
  check_shape(dst, {src.size(1), src.size(0)}, op);
  check_dtype(dst, src.dtype(), op);
  check_same_device({&src, &dst}, op);
}
}  // namespace

void transpose(const Tensor& src, Tensor& dst) {
  check_transpose(src, dst, "transpose: dst");
  GPT_BACKEND_CALL(src.device(), transpose, src, dst);
}

void add_transposed(const Tensor& src, Tensor& dst) {
  check_transpose(src, dst, "add_transposed: dst");
  GPT_BACKEND_CALL(src.device(), add_transposed, src, dst);
}

}  // namespace gpt
