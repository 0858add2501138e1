#include "kernels/attention.h"

#include <cmath>
#include <initializer_list>

#include "kernels/dispatch.h"

namespace gpt {

namespace {

void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  GPT_CHECK(q.ndim() == 3, op, ": q must be [T, H, D], got ", q.describe());
  GPT_CHECK(is_floating(q.dtype()), op, ": q must be f64, f32 or bf16, got ", q.describe());
  check_shape(k, q.shape(), op);
  check_shape(v, q.shape(), op);
  check_dtype(k, q.dtype(), op);
  check_dtype(v, q.dtype(), op);
}

void check_cu_seqlens_layout(const Tensor& cu_seqlens, const char* op) {
  GPT_CHECK(cu_seqlens.dtype() == DType::i32 && cu_seqlens.ndim() == 1 && cu_seqlens.size(0) >= 2, op,
            ": cu_seqlens must be int32 [R] with R >= 2, got ", cu_seqlens.describe());
}

void check_window_and_scale(int64_t window, float scale, const char* op) {
  GPT_CHECK(window >= 0, op, ": window must be >= 0 tokens, got ", window);
  GPT_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
}

}  // namespace

void check_cu_seqlens_values(const Tensor& cu_seqlens, int64_t tokens, const char* op) {
  check_cu_seqlens_layout(cu_seqlens, op);
  GPT_CHECK(cu_seqlens.is_cpu(), op, ": cu_seqlens values can only be checked on the CPU");
  const int32_t* cu = cu_seqlens.data<int32_t>();
  const int64_t r = cu_seqlens.size(0);
  GPT_CHECK(cu[0] == 0, op, ": cu_seqlens[0] must be 0, got ", cu[0]);
  for (int64_t i = 1; i < r; ++i) {
    GPT_CHECK(cu[i] >= cu[i - 1], op, ": cu_seqlens must be non-decreasing, got cu_seqlens[", i - 1, "] = ", cu[i - 1],
              " > cu_seqlens[", i, "] = ", cu[i]);
  }
  GPT_CHECK(cu[r - 1] == tokens, op, ": cu_seqlens must end at T = ", tokens, ", got cu_seqlens[", r - 1,
            "] = ", cu[r - 1]);
}

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                       Tensor& lse, int64_t window, float scale) {
  constexpr const char* op = "attention_forward";
  check_qkv(q, k, v, op);
  check_cu_seqlens_layout(cu_seqlens, op);
  check_window_and_scale(window, scale, op);
  check_shape(y, q.shape(), "attention_forward: y");
  check_dtype(y, q.dtype(), "attention_forward: y");
  check_shape(lse, {q.size(1), q.size(0)}, "attention_forward: lse ([H, T])");
  check_dtype(lse, stat_dtype(q.dtype()), "attention_forward: lse");
  check_same_device({&q, &k, &v, &cu_seqlens, &y, &lse}, op);
  GPT_BACKEND_CALL(q.device(), attention_forward, q, k, v, cu_seqlens, y, lse, window, scale);
}

void attention_backward(const Tensor& dy, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                        const Tensor& y, const Tensor& lse, Tensor& dq, Tensor& dk, Tensor& dv, int64_t window,
                        float scale, AttentionGradWrites writes) {
  constexpr const char* op = "attention_backward";
  check_qkv(q, k, v, op);
  check_cu_seqlens_layout(cu_seqlens, op);
  check_window_and_scale(window, scale, op);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dy, &y, &dq, &dk, &dv}) {
    check_shape(*t, q.shape(), "attention_backward: dy/y/dq/dk/dv");
    check_dtype(*t, q.dtype(), "attention_backward: dy/y/dq/dk/dv");
  }
  check_shape(lse, {q.size(1), q.size(0)}, "attention_backward: lse ([H, T])");
  check_dtype(lse, stat_dtype(q.dtype()), "attention_backward: lse");
  check_same_device({&dy, &q, &k, &v, &cu_seqlens, &y, &lse, &dq, &dk, &dv}, op);
  GPT_BACKEND_CALL(q.device(), attention_backward, dy, q, k, v, cu_seqlens, y, lse, dq, dk, dv, window, scale, writes);
}

void zero_overwritten(const AttentionGradWrites& writes, Tensor& dq, Tensor& dk, Tensor& dv) {
  if (writes.dq == GradWrite::overwrite) dq.zero_();
  if (writes.dk == GradWrite::overwrite) dk.zero_();
  if (writes.dv == GradWrite::overwrite) dv.zero_();
}

void double_cu_seqlens(const Tensor& cu_seqlens, Tensor& doubled) {
  check_cu_seqlens_layout(cu_seqlens, "double_cu_seqlens: cu_seqlens");
  check_shape(doubled, cu_seqlens.shape(), "double_cu_seqlens: doubled");
  check_dtype(doubled, DType::i32, "double_cu_seqlens: doubled");
  check_same_device({&cu_seqlens, &doubled}, "double_cu_seqlens");
  GPT_BACKEND_CALL(cu_seqlens.device(), double_cu_seqlens, cu_seqlens, doubled);
}

}  // namespace gpt
