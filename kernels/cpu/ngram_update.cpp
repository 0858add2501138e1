// CPU reference of kernels/ngram_update.h.
#include <cmath>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/row_groups.h"
#include "kernels/ngram_update.h"

namespace gpt::cpu {

namespace {

// Calls f.template operator()<A>() for the accumulation type of a cycle (f32 or f64).
template <typename F>
void with_cycle_type(DType dtype, F&& f) {
  if (dtype == DType::f64) {
    f.template operator()<double>();
  } else {
    f.template operator()<float>();
  }
}

}  // namespace

void ngram_cycle_add(Tensor& cycle, const Tensor& slots, const Tensor& sums, bool round_fp16) {
  const int64_t n = slots.size(0), d = cycle.size(1);
  const int32_t* slot = slots.data<int32_t>();
  check_row_ids(slot, n, cycle.size(0), "ngram_cycle_add: slots");
  with_cycle_type(cycle.dtype(), [&]<typename A>() {
    const A* src = sums.data<A>();
    A* base = cycle.data<A>();
    for (int64_t u = 0; u < n; ++u) {
      A* dst = base + static_cast<int64_t>(slot[u]) * d;
      for (int64_t c = 0; c < d; ++c) {
        const A sum = dst[c] + src[u * d + c];
        if constexpr (std::is_same_v<A, float>) {
          dst[c] = round_fp16 ? round_to_fp16(sum) : sum;
        } else {
          dst[c] = sum;
        }
      }
    }
  });
}

void ngram_cycle_gather(const Tensor& cycle, const Tensor& slots, Tensor& out) {
  const int64_t n = slots.size(0), d = cycle.size(1);
  const int32_t* slot = slots.data<int32_t>();
  check_row_ids(slot, n, cycle.size(0), "ngram_cycle_gather: slots");
  dispatch_floating(out.dtype(), "ngram_cycle_gather", [&]<typename T>() {
    using A = acc_t<T>;
    const A* src = cycle.data<A>();
    T* dst = out.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      const A* row = src + static_cast<int64_t>(slot[i]) * d;
      for (int64_t c = 0; c < d; ++c) dst[i * d + c] = store<T>(row[c]);
    }
  });
}

void ngram_sparse_adam(Tensor& table, Tensor& second_moment, Tensor& stamps, const Tensor& beta2_history,
                       const Tensor& rows, const Tensor& grad, const NgramAdamStep& step) {
  const int64_t n = rows.size(0), d = table.size(1), e = step.event;
  const int32_t* row = rows.data<int32_t>();
  check_row_ids(row, n, table.size(0), "ngram_sparse_adam: rows");
  const float* history = beta2_history.data<float>();
  float* moment = second_moment.data<float>();
  int64_t* stamp = stamps.data<int64_t>();
  const auto beta = static_cast<float>(step.beta2);
  const auto one_minus_beta = static_cast<float>(1.0 - step.beta2);
  dispatch_floating(table.dtype(), "ngram_sparse_adam", [&]<typename T>() {
    using A = acc_t<T>;
    const T* g_all = grad.data<T>();
    T* p_all = table.data<T>();
#pragma omp parallel for schedule(static) if (n * d > (1 << 15))
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = row[i];
      const T* g = g_all + i * d;
      T* p = p_all + r * d;
      A square_sum = 0;
      for (int64_t c = 0; c < d; ++c) square_sum += load(g[c]) * load(g[c]);
      const auto mean_square = static_cast<float>(square_sum / static_cast<A>(d));
      float v = moment[r];
      for (int64_t k = stamp[r] + 1; k < e; ++k) v = history[k - 1] * v;  // what the untouched events owe
      const float decayed = beta * v;
      v = decayed + one_minus_beta * mean_square;
      moment[r] = v;
      stamp[r] = e;
      const A denom = std::sqrt(static_cast<A>(v)) + static_cast<A>(step.eps);
      for (int64_t c = 0; c < d; ++c) {
        const A pc = load(p[c]);
        A u = load(g[c]) / denom * static_cast<A>(step.step_scale);
        if (u * pc > 0) u += static_cast<A>(step.decay_scale) * pc;
        p[c] = store<T>(pc - u);
      }
    }
  });
}

void ngram_decay_untouched(Tensor& second_moment, Tensor& stamps, double beta2, int64_t event) {
  const auto beta = static_cast<float>(beta2);
  float* moment = second_moment.data<float>();
  int64_t* stamp = stamps.data<int64_t>();
  for (int64_t r = 0; r < second_moment.numel(); ++r) {
    if (stamp[r] == event) continue;
    moment[r] = beta * moment[r];
    stamp[r] = event;
  }
}

}  // namespace gpt::cpu
