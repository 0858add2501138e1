#include "kernels/softcap_loss.h"

#include <algorithm>

#include "kernels/dispatch.h"
#include "kernels/gemm.h"

namespace gpt {

namespace {

void check_logits_and_targets(const Tensor& z_raw, const Tensor& targets, const char* op) {
  GPT_CHECK(z_raw.ndim() == 2 && is_floating(z_raw.dtype()), op, ": z_raw must be a floating [T, V], got ",
            z_raw.describe());
  check_shape(targets, {z_raw.size(0)}, op);
  check_dtype(targets, DType::i64, op);
  check_same_device({&z_raw, &targets}, op);
}

}  // namespace

void softcap_train_loss(const Tensor& z_raw, const Tensor& targets, const Tensor& prefix_table,
                        const TrainLossConfig& config, Tensor& loss, Tensor& dz_raw) {
  check_logits_and_targets(z_raw, targets, "softcap_train_loss");
  GPT_CHECK(!config.mtp_weights.empty(), "softcap_train_loss: mtp_weights must hold at least one weight");
  if (prefix_table.defined()) {
    check_shape(prefix_table, {z_raw.size(1)}, "softcap_train_loss: prefix_table");
    check_dtype(prefix_table, DType::i64, "softcap_train_loss: prefix_table");
    check_same_device({&z_raw, &prefix_table}, "softcap_train_loss");
  }
  check_shape(loss, {1}, "softcap_train_loss: loss");
  check_dtype(loss, stat_dtype(z_raw.dtype()), "softcap_train_loss: loss");
  check_shape(dz_raw, z_raw.shape(), "softcap_train_loss: dz_raw");
  GPT_CHECK(dz_raw.dtype() == z_raw.dtype() || dz_raw.dtype() == DType::e5m2, "softcap_train_loss: dz_raw must be ",
            dtype_name(z_raw.dtype()), " or e5m2, got ", dz_raw.describe());
  GPT_CHECK(config.grad_scale > 0.0f, "softcap_train_loss: grad_scale must be positive, got ", config.grad_scale);
  check_same_device({&z_raw, &loss, &dz_raw}, "softcap_train_loss");
  GPT_BACKEND_CALL(z_raw.device(), softcap_train_loss, z_raw, targets, prefix_table, config, loss, dz_raw);
}

void validation_loss_rows_add(const Tensor& z_raw, const Tensor& targets, Tensor& loss_sum) {
  check_logits_and_targets(z_raw, targets, "validation_loss_rows_add");
  check_shape(loss_sum, {1}, "validation_loss_rows_add: loss_sum");
  check_dtype(loss_sum, stat_dtype(z_raw.dtype()), "validation_loss_rows_add: loss_sum");
  check_same_device({&z_raw, &loss_sum}, "validation_loss_rows_add");
  GPT_BACKEND_CALL(z_raw.device(), validation_loss_rows_add, z_raw, targets, loss_sum);
}

void validation_loss(const Tensor& h, const Tensor& lm_head, const Tensor& targets, int64_t chunk_rows,
                     Tensor& loss_sum) {
  GPT_CHECK(h.ndim() == 2 && lm_head.ndim() == 2 && h.size(1) == lm_head.size(0),
            "validation_loss: need h [T, d] and lm_head [d, V], got ", h.describe(), " and ", lm_head.describe());
  GPT_CHECK(chunk_rows >= 1, "validation_loss: chunk_rows must be >= 1, got ", chunk_rows);
  check_shape(targets, {h.size(0)}, "validation_loss: targets");
  check_shape(loss_sum, {1}, "validation_loss: loss_sum");
  loss_sum.zero_();
  const int64_t rows = h.size(0);
  if (rows == 0) return;
  Tensor workspace = Tensor::empty({std::min(chunk_rows, rows), lm_head.size(1)}, h.dtype(), h.device());
  for (int64_t begin = 0; begin < rows; begin += chunk_rows) {
    const int64_t end = std::min(rows, begin + chunk_rows);
    Tensor z = workspace.slice(0, end - begin);
    gemm(h.slice(begin, end), lm_head, z);
    validation_loss_rows_add(z, targets.slice(begin, end), loss_sum);
  }
}

}  // namespace gpt
