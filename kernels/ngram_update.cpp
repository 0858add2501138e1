#include "kernels/ngram_update.h"

#include <cmath>
#include <limits>

#include "base/check.h"
#include "kernels/dispatch.h"

namespace gpt {

namespace {

void check_cycle_args(const Tensor& cycle, const Tensor& slots, const Tensor& rows_like, const char* op) {
  GPT_CHECK(cycle.ndim() == 2 && (cycle.dtype() == DType::f32 || cycle.dtype() == DType::f64), op,
            ": cycle must be an f32 or f64 [slots, d] tensor, got ", cycle.describe());
  GPT_CHECK(slots.ndim() == 1, op, ": slots must be i32 [n], got ", slots.describe());
  check_dtype(slots, DType::i32, op);
  check_shape(rows_like, {slots.size(0), cycle.size(1)}, op);
}

}  // namespace

float round_to_fp16(float x) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  const float a = std::fabs(x);
  if (a >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), x);  // past max 65504's half-ulp
  float r = 0;
  if (a < 0x1p-14f) {
    r = std::nearbyint(a * 0x1p24f) * 0x1p-24f;  // subnormal spacing 2^-24
  } else {
    int e = 0;
    (void)std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1): 11 significant bits keep spacing 2^(e-11)
    r = std::ldexp(std::nearbyint(std::ldexp(a, 11 - e)), e - 11);
  }
  return std::copysign(r, x);
}

void ngram_cycle_add(Tensor& cycle, const Tensor& slots, const Tensor& sums, bool round_fp16) {
  check_cycle_args(cycle, slots, sums, "ngram_cycle_add: sums");
  check_dtype(sums, cycle.dtype(), "ngram_cycle_add: sums");
  GPT_CHECK(!round_fp16 || cycle.dtype() == DType::f32, "ngram_cycle_add: fp16 rounding needs an f32 cycle, got ",
            cycle.describe());
  check_same_device({&cycle, &slots, &sums}, "ngram_cycle_add");
  GPT_BACKEND_CALL(cycle.device(), ngram_cycle_add, cycle, slots, sums, round_fp16);
}

void ngram_cycle_gather(const Tensor& cycle, const Tensor& slots, Tensor& out) {
  check_cycle_args(cycle, slots, out, "ngram_cycle_gather: out");
  GPT_CHECK(is_floating(out.dtype()) && stat_dtype(out.dtype()) == cycle.dtype(), "ngram_cycle_gather: out ",
            out.describe(), " does not round from a cycle of ", dtype_name(cycle.dtype()));
  check_same_device({&cycle, &slots, &out}, "ngram_cycle_gather");
  GPT_BACKEND_CALL(cycle.device(), ngram_cycle_gather, cycle, slots, out);
}

void ngram_sparse_adam(Tensor& table, Tensor& second_moment, Tensor& stamps, const Tensor& beta2_history,
                       const Tensor& rows, const Tensor& grad, const NgramAdamStep& step) {
  const char* op = "ngram_sparse_adam";
  GPT_CHECK(table.ndim() == 2 && is_floating(table.dtype()), op, ": table must be a floating [R, d] tensor, got ",
            table.describe());
  const int64_t R = table.size(0), d = table.size(1);
  check_shape(second_moment, {R}, "ngram_sparse_adam: second_moment");
  check_dtype(second_moment, DType::f32, "ngram_sparse_adam: second_moment");
  check_shape(stamps, {R}, "ngram_sparse_adam: stamps");
  check_dtype(stamps, DType::i64, "ngram_sparse_adam: stamps");
  GPT_CHECK(step.event >= 1, op, ": event count must be >= 1, got ", step.event);
  GPT_CHECK(beta2_history.ndim() == 1 && beta2_history.size(0) >= step.event, op, ": beta2_history must hold at least ",
            step.event, " events, got ", beta2_history.describe());
  check_dtype(beta2_history, DType::f32, "ngram_sparse_adam: beta2_history");
  GPT_CHECK(rows.ndim() == 1, op, ": rows must be i32 [n], got ", rows.describe());
  check_dtype(rows, DType::i32, "ngram_sparse_adam: rows");
  check_shape(grad, {rows.size(0), d}, "ngram_sparse_adam: grad");
  check_dtype(grad, table.dtype(), "ngram_sparse_adam: grad");
  check_same_device({&table, &second_moment, &stamps, &beta2_history, &rows, &grad}, op);
  GPT_BACKEND_CALL(table.device(), ngram_sparse_adam, table, second_moment, stamps, beta2_history, rows, grad, step);
}

void ngram_decay_untouched(Tensor& second_moment, Tensor& stamps, double beta2, int64_t event) {
  GPT_CHECK(second_moment.ndim() == 1, "ngram_decay_untouched: second_moment must be f32 [R], got ",
            second_moment.describe());
  check_dtype(second_moment, DType::f32, "ngram_decay_untouched: second_moment");
  check_shape(stamps, second_moment.shape(), "ngram_decay_untouched: stamps");
  check_dtype(stamps, DType::i64, "ngram_decay_untouched: stamps");
  check_same_device({&second_moment, &stamps}, "ngram_decay_untouched");
  GPT_BACKEND_CALL(second_moment.device(), ngram_decay_untouched, second_moment, stamps, beta2, event);
}

}  // namespace gpt
