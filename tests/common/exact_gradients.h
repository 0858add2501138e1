#pragma once
// Synthetic gradients whose every sum is exact, for optimizer tests that compare world sizes bitwise.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpt::test {

// Gradient of slice k at step s for parameter index pi: n integers in [−4, 4] times 2^−10 (a xorshift stream
// seeded by s, k and pi). Every partial sum an optimizer step forms over slices and ranks (and the Adam pair and
// a tied transpose) stays an integer below 2^8 times a power of two, so it is exact in bf16 and fp32 whatever the
// summation order.
inline std::vector<double> slice_grad(int64_t s, int k, size_t pi, int64_t n) {
  std::vector<double> g(static_cast<size_t>(n));
  uint64_t x = 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(s) * 1315423911u) ^ (static_cast<uint64_t>(k) << 40) ^
               (static_cast<uint64_t>(pi) << 52);
  for (auto& v : g) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    v = std::ldexp(static_cast<double>(static_cast<int>((x * 2685821657736338717ull) >> 61) - 4), -10);
  }
  return g;
}

}  // namespace gpt::test
