#include "kernels/dc_attention.h"

#include <cmath>
#include <initializer_list>

#include "kernels/dispatch.h"
#include "kernels/gate_lanes.h"

namespace gpt {

namespace {

void check_dc(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, const Tensor& gates,
              DcLanes lanes, float scale, int64_t keys, const char* op) {
  GPT_CHECK(q.ndim() == 3, op, ": q must be [T, H, D], got ", q.describe());
  GPT_CHECK(is_floating(q.dtype()), op, ": q must be f64, f32 or bf16, got ", q.describe());
  for (const Tensor* t : {&k, &v}) {
    check_shape(*t, q.shape(), op);
    check_dtype(*t, q.dtype(), op);
  }
  GPT_CHECK(cu_seqlens.dtype() == DType::i32 && cu_seqlens.ndim() == 1 && cu_seqlens.size(0) >= 2, op,
            ": cu_seqlens must be int32 [R] with R >= 2, got ", cu_seqlens.describe());
  check_gate_lanes(gates, q.size(0), q.size(1), lanes.w1, q.dtype(), op);
  check_gate_lanes(gates, q.size(0), q.size(1), lanes.w2, q.dtype(), op);
  GPT_CHECK(keys >= 1, op, ": keys must be >= 1, got ", keys);
  GPT_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
}

}  // namespace

void dc_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                          const Tensor& gates, DcLanes lanes, const Tensor& y_core, Tensor& y_out, Tensor& lse,
                          float scale, int64_t keys) {
  constexpr const char* op = "dc_attention_forward";
  check_dc(q, k, v, cu_seqlens, gates, lanes, scale, keys, op);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&y_core, &y_out}) {
    check_shape(*t, q.shape(), "dc_attention_forward: y_core/y_out");
    check_dtype(*t, q.dtype(), "dc_attention_forward: y_core/y_out");
  }
  check_shape(lse, {q.size(1), q.size(0)}, "dc_attention_forward: lse ([H, T])");
  check_dtype(lse, stat_dtype(q.dtype()), "dc_attention_forward: lse");
  check_same_device({&q, &k, &v, &cu_seqlens, &gates, &y_core, &y_out, &lse}, op);
  GPT_BACKEND_CALL(q.device(), dc_attention_forward, q, k, v, cu_seqlens, gates, lanes, y_core, y_out, lse, scale,
                   keys);
}

void dc_attention_backward(const Tensor& dy_out, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& gates, DcLanes lanes, const Tensor& lse, Tensor& dq,
                           Tensor& dk, Tensor& dv, Tensor& dgates, float scale, int64_t keys) {
  constexpr const char* op = "dc_attention_backward";
  check_dc(q, k, v, cu_seqlens, gates, lanes, scale, keys, op);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dy_out, &dq, &dk, &dv}) {
    check_shape(*t, q.shape(), "dc_attention_backward: dy_out/dq/dk/dv");
    check_dtype(*t, q.dtype(), "dc_attention_backward: dy_out/dq/dk/dv");
  }
  check_shape(lse, {q.size(1), q.size(0)}, "dc_attention_backward: lse ([H, T])");
  check_dtype(lse, stat_dtype(q.dtype()), "dc_attention_backward: lse");
  check_shape(dgates, gates.shape(), "dc_attention_backward: dgates");
  check_dtype(dgates, gates.dtype(), "dc_attention_backward: dgates");
  check_same_device({&dy_out, &q, &k, &v, &cu_seqlens, &gates, &lse, &dq, &dk, &dv, &dgates}, op);
  GPT_BACKEND_CALL(q.device(), dc_attention_backward, dy_out, q, k, v, cu_seqlens, gates, lanes, lse, dq, dk, dv,
                   dgates, scale, keys);
}

}  // namespace gpt
