#pragma once
// Host-side bfloat16 with round-to-nearest-even, bit-compatible with CUDA's __nv_bfloat16.
#include <bit>
#include <cmath>
#include <cstdint>

namespace gpt {

struct bf16 {
  uint16_t bits = 0;

  bf16() = default;
  explicit bf16(float f) : bits(round_bits(f)) {}
  explicit operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
  static bf16 from_bits(uint16_t b) {
    bf16 r;
    r.bits = b;
    return r;
  }

  static uint16_t round_bits(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN, sign kept
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return static_cast<uint16_t>(u >> 16);
  }
};
static_assert(sizeof(bf16) == 2);

// Round a float to the nearest bf16 value and return it as float (the §0.4 rounding point).
inline float round_bf16(float f) { return static_cast<float>(bf16(f)); }

}  // namespace gpt
