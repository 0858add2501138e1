#pragma once
// Half-truncated rotary embedding with interleaved pairs, YaRN rescaling and the attention scale
// (RECIPE §2.11; tiny sizes in §R.1).
//
// Frequencies. For head dim D (a multiple of 4, >= 8) there are F = D/4 rotating frequencies
//   ω_k = 1024^(−k/(F−1)),  k = 0 … F−1      (D = 128: 32 values 1024^(−k/31); D = 16: 4 values 1024^(−k/3))
// Pair k = dims (2k, 2k+1) for k < F rotates at ω_k, so dims [0, D/2) rotate and [D/2, D) are stationary.
//
// Tables. cos[p, k] = cos(θ), sin[p, k] = sin(θ) with θ = p·ω_k evaluated in fp32 (fp32 product, fp32
// cos/sin), then stored in the table dtype (bf16 in training, f64/f32 in tests): shape [P, F]. Stationary
// dims have no table entries (cos 0 = 1, sin 0 = 0 exactly).
//
// Rotation of a head vector z of the token at position p, for k < F:
//   z'_2k = cos·z_2k + sin·z_2k+1,   z'_2k+1 = cos·z_2k+1 − sin·z_2k      (multiplication by e^{−iθ}),
//   z'_d = z_d for d >= D/2.
// Computed in the accumulation type from the stored x and table, rounded once into y.
//
// Positions. RotaryLayout::normal: token t at position t (its index in the rank's packed sequence, not in
// its document). RotaryLayout::paired (paired-head layers, §2.9 step 7): head h of token t is at position
// 2t + (h mod 2): even heads at 2t, odd heads at 2t+1. Both layouts read the same table, which therefore
// needs P >= T rows (normal) or P >= 2T rows (paired); the recipe builds P = 2·262144.
//
// YaRN (when the long window changes from w_old to w_new tokens; fp32 like the frequencies):
//   r = w_old·ω/(2π),  γ = clamp((r − 1)/(32 − 1), 0, 1),  ω ← ω·(w_old/w_new + γ·(1 − w_old/w_new)),
//   τ ← τ·(1 + 0.2·ln(w_new/w_old))   (τ in double; starts at 0.1).
// Tables must be rebuilt (cos_table/sin_table) after a rescale.
#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

namespace gpt {

inline constexpr double kInitialAttentionScale = 0.1;  // τ before any YaRN event
inline constexpr float kYarnAlpha = 1.0f;              // r below alpha: pure interpolation
inline constexpr float kYarnBeta = 32.0f;              // r above beta: frequency kept

enum class RotaryLayout : uint8_t { normal, paired };

// Host-side state of the rotary embedding: frequencies and attention scale; builds the tables.
class RotaryTables {
 public:
  // head_dim: D (multiple of 4, >= 8); positions: P, the number of table rows.
  RotaryTables(int64_t head_dim, int64_t positions);

  int64_t head_dim() const { return head_dim_; }
  int64_t positions() const { return positions_; }
  int64_t frequency_count() const { return head_dim_ / 4; }
  const std::vector<float>& frequencies() const { return omega_; }  // ω_k, fp32, F values
  double attention_scale() const { return tau_; }                   // τ

  // YaRN rescale of ω and τ for a long-window change old_window -> new_window (tokens, both > 0).
  void apply_yarn(int64_t old_window, int64_t new_window);

  // [P, F] tables of cos(p·ω_k), sin(p·ω_k) in `dtype` (f64, f32 or bf16), placed on `device`.
  Tensor cos_table(DType dtype, Device device = Device::cpu) const;
  Tensor sin_table(DType dtype, Device device = Device::cpu) const;

 private:
  Tensor build_table(bool cosine, DType dtype, Device device) const;

  int64_t head_dim_;
  int64_t positions_;
  std::vector<float> omega_;
  double tau_ = kInitialAttentionScale;
};

// Argument checks of the ops below (x and out [T, H, D], tables [P, D/4] of x's dtype, enough table rows for the
// layout); shared with the ops that rotate as one of their steps (kernels/qk_norm_rotary.h).
void check_rotary_operands(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout,
                           const Tensor& out, const char* op);

// y = rotation of x. x, y: [T, H, D] of one floating dtype; cos, sin: [P, D/4] of the same dtype.
// y may alias x (each pair is read before it is written).
void rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y);
// dx += rotation of dy by −θ (the transpose of the forward). dy, dx: [T, H, D] of the tables' dtype.
void rotary_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& dx);

namespace cpu {
void rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y);
void rotary_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& dx);
}  // namespace cpu
namespace cuda {
void rotary_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& y);
void rotary_backward(const Tensor& dy, const Tensor& cos, const Tensor& sin, RotaryLayout layout, Tensor& dx);
}  // namespace cuda

}  // namespace gpt
