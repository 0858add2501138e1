// CPU reference of kernels/softcap_loss.h: one row of V logits at a time (per thread), never [T, V] temporaries.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/fp8.h"
#include "kernels/softcap_loss.h"

namespace gpt::cpu {

namespace {

constexpr int64_t kParallelMinRows = 64;

void check_ids(const int64_t* ids, int64_t n, int64_t lo, int64_t hi, const char* what) {
  for (int64_t i = 0; i < n; ++i) {
    GPT_CHECK(ids[i] >= lo && ids[i] < hi, what, ": entry ", ids[i], " at ", i, " is outside [", lo, ", ", hi, ")");
  }
}

// log Σ exp(z) of one row, max-shifted.
template <typename A>
A log_sum_exp(const A* z, int64_t n) {
  const A m = *std::max_element(z, z + n);
  A sum = 0;
  for (int64_t v = 0; v < n; ++v) sum += std::exp(z[v] - m);
  return m + std::log(sum);
}

}  // namespace

void softcap_train_loss(const Tensor& z_raw, const Tensor& targets, const Tensor& prefix_table,
                        const TrainLossConfig& config, Tensor& loss, Tensor& dz_raw) {
  const int64_t rows = z_raw.size(0), vocab = z_raw.size(1);
  const int64_t* y = targets.data<int64_t>();
  check_ids(y, rows, 0, vocab, "softcap_train_loss: targets");
  const int64_t* prefix = prefix_table.defined() ? prefix_table.data<int64_t>() : nullptr;
  if (prefix != nullptr) check_ids(prefix, vocab, -1, vocab, "softcap_train_loss: prefix_table");
  const auto n_mtp = static_cast<int64_t>(config.mtp_weights.size());
  const bool to_e5m2 = dz_raw.dtype() == DType::e5m2;
  dispatch_floating(z_raw.dtype(), "softcap_train_loss", [&]<typename T>() {
    using A = acc_t<T>;
    const T* zp = z_raw.data<T>();
    T* dzp = to_e5m2 ? nullptr : dz_raw.data<T>();
    auto* g8 = to_e5m2 ? static_cast<uint8_t*>(dz_raw.raw()) : nullptr;
    std::vector<double> row_loss(static_cast<size_t>(rows), 0.0);
    A w_all = 0;
    for (float w : config.mtp_weights) w_all += A(w);
    const A scale = A(config.loss_scale);
    const A cap_slope = A(kSoftcap) / A(kSoftcapDivisor);
#pragma omp parallel if (rows >= kParallelMinRows)
    {
      std::vector<A> s(static_cast<size_t>(vocab)), z(static_cast<size_t>(vocab)), dz(static_cast<size_t>(vocab));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < rows; ++t) {
        const T* zr = zp + t * vocab;
        for (int64_t v = 0; v < vocab; ++v) {
          const A a = (load(zr[v]) + A(kSoftcapShift)) / A(kSoftcapDivisor);
          s[v] = load(store<T>(A(0.5) + A(0.5) * std::tanh(A(0.5) * a)));  // §3.1: s rounded to the logits' dtype
          z[v] = A(kSoftcap) * s[v];
        }
        // Softmax through the max-shifted exponentials, kept from the log-sum-exp (one exp per logit, not two).
        const A z_max = *std::max_element(z.begin(), z.end());
        A sum = 0;
        for (int64_t v = 0; v < vocab; ++v) {
          dz[v] = std::exp(z[v] - z_max);
          sum += dz[v];
        }
        const A lse = z_max + std::log(sum);
        const int64_t p = prefix != nullptr ? prefix[y[t]] : -1;
        const A s_w = w_all + (p >= 0 ? A(config.prefix_weight) : A(0));
        const A softmax_scale = s_w / sum;
        for (int64_t v = 0; v < vocab; ++v) dz[v] *= softmax_scale;
        double l = 0.0;
        for (int64_t k = 0; k < n_mtp && t + k < rows; ++k) {  // targets beyond the microbatch are dropped
          const A w = A(config.mtp_weights[static_cast<size_t>(k)]);
          const int64_t target = y[t + k];
          l += static_cast<double>(w * (lse - z[target]));
          dz[target] -= w;
        }
        if (p >= 0) {
          const A w = A(config.prefix_weight);
          l += static_cast<double>(w * (lse - z[p]));
          dz[p] -= w;
        }
        row_loss[static_cast<size_t>(t)] = l;
        for (int64_t v = 0; v < vocab; ++v) {
          const A g = scale * dz[v] * cap_slope * s[v] * (A(1) - s[v]);
          if (to_e5m2) {
            g8[t * vocab + v] = float_to_e5m2(static_cast<float>(g) / config.grad_scale);
          } else {
            dzp[t * vocab + v] = store<T>(g);
          }
        }
      }
    }
    double total = 0.0;
    for (double l : row_loss) total += l;
    loss.data<A>()[0] = static_cast<A>(total * static_cast<double>(config.loss_scale));
  });
}

void validation_loss_rows_add(const Tensor& z_raw, const Tensor& targets, Tensor& loss_sum) {
  const int64_t rows = z_raw.size(0), vocab = z_raw.size(1);
  const int64_t* y = targets.data<int64_t>();
  check_ids(y, rows, 0, vocab, "validation_loss: targets");
  dispatch_floating(z_raw.dtype(), "validation_loss", [&]<typename T>() {
    using A = acc_t<T>;
    const T* zp = z_raw.data<T>();
    std::vector<double> row_loss(static_cast<size_t>(rows), 0.0);
#pragma omp parallel if (rows >= kParallelMinRows)
    {
      std::vector<A> z(static_cast<size_t>(vocab));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < rows; ++t) {
        for (int64_t v = 0; v < vocab; ++v) {
          const A a = (load(zp[t * vocab + v]) + A(kSoftcapShift)) / A(kSoftcapDivisor);
          z[v] = A(kSoftcap) / (A(1) + std::exp(-a));  // fp32, s not rounded (§3.4)
        }
        row_loss[static_cast<size_t>(t)] = static_cast<double>(log_sum_exp(z.data(), vocab) - z[y[t]]);
      }
    }
    double total = 0.0;
    for (double l : row_loss) total += l;
    A* out = loss_sum.data<A>();
    out[0] = static_cast<A>(static_cast<double>(out[0]) + total);
  });
}

}  // namespace gpt::cpu
