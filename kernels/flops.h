#pragma once
// Model FLOP counter of RECIPE §10.2 (used for MFU figures in logs and benchmark reports).
//
// GEMM parameters touched per token: N_mm = attention (Q, K, V, O: 4·d² per attention layer) + MLP (2·hidden·d per
// layer) + lm_head (d·V). Training costs 6 FLOP per parameter per token (forward 2, backward 4); a validation
// forward 2. The attention core is counted as an upper bound where every query sees its full window:
// 12·d·Σ_layers (w_ℓ + 1) per training token (QKᵀ and PV at 2 FLOP per MAC each, ×3 for forward + backward);
// paired-head layers count like normal ones. MUDD, gates and DC are below 1% and not counted.
#include <cstdint>

namespace gpt {

struct FlopModel {
  int64_t d = 768;
  int64_t mlp_hidden = 3072;
  int64_t vocab = 50304;
  int64_t attention_layers = 10;  // layer 6 has none (§2.1)
  int64_t mlp_layers = 11;
  int64_t long_window_layers = 2;  // layers 3 and 10; the other attention layers use the short window
};

constexpr int64_t attention_gemm_params(const FlopModel& m) { return m.attention_layers * 4 * m.d * m.d; }
constexpr int64_t mlp_gemm_params(const FlopModel& m) { return m.mlp_layers * 2 * m.mlp_hidden * m.d; }
constexpr int64_t lm_head_params(const FlopModel& m) { return m.d * m.vocab; }
// N_mm of §10.1.
constexpr int64_t gemm_params_per_token(const FlopModel& m) {
  return attention_gemm_params(m) + mlp_gemm_params(m) + lm_head_params(m);
}

constexpr double training_gemm_flops_per_token(const FlopModel& m) {
  return 6.0 * static_cast<double>(gemm_params_per_token(m));
}
constexpr double validation_gemm_flops_per_token(const FlopModel& m) {
  return 2.0 * static_cast<double>(gemm_params_per_token(m));
}

// Upper bound of the attention core per training token; windows in tokens (w: keys t−w … t).
constexpr double training_attention_flops_per_token(const FlopModel& m, int64_t short_window, int64_t long_window) {
  const int64_t short_layers = m.attention_layers - m.long_window_layers;
  const int64_t keys = short_layers * (short_window + 1) + m.long_window_layers * (long_window + 1);
  return 12.0 * static_cast<double>(m.d) * static_cast<double>(keys);
}

constexpr double training_flops_per_token(const FlopModel& m, int64_t short_window, int64_t long_window) {
  return training_gemm_flops_per_token(m) + training_attention_flops_per_token(m, short_window, long_window);
}

}  // namespace gpt
