#pragma once
// The equalizer and the cautious update of RECIPE §4.3 steps 4–5 (kernels/normuon.h), shared by NorMuon and
// ANVIL (§S.8). They differ only in the decay gate: NorMuon decays where U⊙P ≥ 0, ANVIL where v_s⊙P ≥ 0 (its slow
// rail), so the gate is either the update itself (gate == nullptr) or a tensor of the state's dtype.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/normuon.h"

namespace gpt::cpu {

// Rounds to the storage type T and back: the W(·) of kernels/normuon.h (identity for float and double).
template <typename T, typename A>
A round_to(A v) {
  return load(store<T>(v));
}

template <typename T>
void equalize_and_update(const Tensor& x, Tensor& second_moment, Tensor& param, Tensor& mantissa,
                         const NorMuonArgs& args, const Tensor* decay_gate) {
  using A = acc_t<T>;
  const int64_t count = param.size(0), rows = param.size(1), cols = param.size(2);
  const bool per_row = rows >= cols;
  const int64_t stats = per_row ? rows : cols;  // length of r and S per matrix
  const int64_t q = per_row ? cols : rows;      // entries averaged into each statistic
  const double shape_mult = std::sqrt(std::max(1.0, static_cast<double>(rows) / static_cast<double>(cols)));
  const T* xp = x.data<T>();
  A* sp = second_moment.data<A>();
  T* pp = param.data<T>();
  const A* gp = decay_gate != nullptr ? decay_gate->data<A>() : nullptr;
  uint16_t* mp = nullptr;
  if constexpr (std::is_same_v<T, bf16>) mp = mantissa.data<uint16_t>();
  const A beta2 = static_cast<A>(args.beta2), one_beta2 = static_cast<A>(1.0 - args.beta2);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < count; ++k) {
    const T* xm = xp + k * rows * cols;
    A* s = sp + k * stats;
    std::vector<A> r(static_cast<size_t>(stats), A(0));
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const A v = load(xm[i * cols + j]);
        r[static_cast<size_t>(per_row ? i : j)] += v * v;
      }
    }
    A sum_r = 0, sum_rg2 = 0;
    std::vector<A> g(static_cast<size_t>(stats));
    for (int64_t t = 0; t < stats; ++t) {
      A& rt = r[static_cast<size_t>(t)];
      rt /= static_cast<A>(q);
      sum_r += rt;
      s[t] = beta2 * s[t] + one_beta2 * rt;
      const A gt = A(1) / std::sqrt(std::max(s[t], A(1e-10)));
      g[static_cast<size_t>(t)] = gt;
      sum_rg2 += rt * gt * gt;
    }
    const A nu = std::sqrt(static_cast<A>(q) * sum_r);
    const A nu_new = std::sqrt(static_cast<A>(q) * sum_rg2);
    const A ratio = nu / std::max(nu_new, A(1e-10));
    for (int64_t t = 0; t < stats; ++t) g[static_cast<size_t>(t)] = round_to<T>(g[static_cast<size_t>(t)] * ratio);

    const double mat_mult = ((args.first_matrix + k) % 2 == 1) ? args.odd_matrix_lr_mul : 1.0;
    const double lr_eff_d = args.lr * shape_mult * mat_mult;
    const A lr_eff = static_cast<A>(lr_eff_d);
    const A decay = static_cast<A>(args.weight_decay * args.lr * lr_eff_d);
    T* pm = pp + k * rows * cols;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t e = i * cols + j;
        const A u = round_to<T>(load(xm[e]) * g[static_cast<size_t>(per_row ? i : j)]);
        A p;
        if constexpr (std::is_same_v<T, bf16>) {
          p = join_master(pm[e], mp[k * rows * cols + e]);
        } else {
          p = pm[e];
        }
        const A gate = gp != nullptr ? gp[k * rows * cols + e] : u;
        const A decayed = (gate * p >= A(0)) ? p - p * decay : p;  // cautious decay: [gate⊙P ≥ 0]
        const A updated = decayed - u * lr_eff;
        if constexpr (std::is_same_v<T, bf16>) {
          split_master(updated, pm[e], mp[k * rows * cols + e]);
        } else {
          pm[e] = updated;
        }
      }
    }
  }
}

}  // namespace gpt::cpu
