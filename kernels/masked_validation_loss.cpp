#include "kernels/masked_validation_loss.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"

namespace gpt {

void masked_validation_loss_rows_add(const Tensor& z_raw, const Tensor& inputs, const Tensor& targets,
                                     const Tensor& mask, Tensor& loss_sum) {
  constexpr const char* op = "masked_validation_loss";
  GPT_CHECK(z_raw.ndim() == 2 && is_floating(z_raw.dtype()), op, ": z_raw must be a floating [T, V], got ",
            z_raw.describe());
  check_shape(inputs, {z_raw.size(0)}, op);
  check_dtype(inputs, DType::i32, op);
  check_shape(targets, {z_raw.size(0)}, op);
  check_dtype(targets, DType::i64, op);
  GPT_CHECK(mask.defined() && mask.ndim() == 2 && mask.dtype() == DType::u8 && mask.size(1) * 8 >= z_raw.size(1), op,
            ": mask must be u8 [rows, >= V/8] for V = ", z_raw.size(1), ", got ",
            mask.defined() ? mask.describe() : std::string("an undefined tensor"));
  check_shape(loss_sum, {1}, "masked_validation_loss: loss_sum");
  check_dtype(loss_sum, stat_dtype(z_raw.dtype()), "masked_validation_loss: loss_sum");
  check_same_device({&z_raw, &inputs, &targets, &mask, &loss_sum}, op);
  GPT_BACKEND_CALL(z_raw.device(), masked_validation_loss_rows_add, z_raw, inputs, targets, mask, loss_sum);
}

void masked_validation_loss(const Tensor& h, const Tensor& lm_head, const Tensor& inputs, const Tensor& targets,
                            const Tensor& mask, int64_t chunk_rows, Tensor& loss_sum) {
  GPT_CHECK(h.ndim() == 2 && lm_head.ndim() == 2 && h.size(1) == lm_head.size(0),
            "masked_validation_loss: need h [T, d] and lm_head [d, V], got ", h.describe(), " and ",
            lm_head.describe());
  GPT_CHECK(chunk_rows >= 1, "masked_validation_loss: chunk_rows must be >= 1, got ", chunk_rows);
  check_shape(inputs, {h.size(0)}, "masked_validation_loss: inputs");
  check_shape(targets, {h.size(0)}, "masked_validation_loss: targets");
  check_shape(loss_sum, {1}, "masked_validation_loss: loss_sum");
  loss_sum.zero_();
  const int64_t rows = h.size(0);
  if (rows == 0) return;
  Tensor workspace = Tensor::empty({std::min(chunk_rows, rows), lm_head.size(1)}, h.dtype(), h.device());
  for (int64_t begin = 0; begin < rows; begin += chunk_rows) {
    const int64_t end = std::min(rows, begin + chunk_rows);
    Tensor z = workspace.slice(0, end - begin);
    gemm(h.slice(begin, end), lm_head, z);
    masked_validation_loss_rows_add(z, inputs.slice(begin, end), targets.slice(begin, end), mask, loss_sum);
  }
}

}  // namespace gpt
