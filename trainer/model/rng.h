#pragma once
// A small, platform-independent random generator for initialisation (the standard library's distributions
// differ between implementations; runs must reproduce on every machine).
#include <cmath>
#include <cstdint>
#include <numbers>

namespace gpt {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed ^ 0x9e3779b97f4a7c15ull) {}

  // splitmix64: passes BigCrush, one 64-bit state, trivially seedable.
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double low, double high) { return low + (high - low) * uniform01(); }
  // Standard normal by Box–Muller (one value per call; the pair's second value is dropped for simplicity).
  double normal() {
    const double u1 = 1.0 - uniform01();  // (0, 1]
    const double u2 = uniform01();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace gpt
