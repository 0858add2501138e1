#pragma once
// Row ids with the frequencies of natural text, for the tests and benchmarks of the embedding scatter: in a
// 49,152-token microbatch a few ids (BOS, ",", " the") occur thousands of times and most occur once or never, which
// uniform ids never show. Rank r (0-based) is drawn with probability ∝ 1 / (r + 1)^exponent (Zipf's law; exponent 1
// gives the most frequent id ≈ 8% of the tokens over 50,304 ranks) and mapped to a row by a fixed bijection of
// [0, rows), so that the frequent rows lie spread over the table rather than at its start. Host code, deterministic
// for a seed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "base/check.h"

namespace gpt {

inline std::vector<int32_t> zipf_ids(int64_t n, int64_t rows, uint64_t seed, double exponent = 1.0) {
  GPT_CHECK(rows > 0 && rows < (int64_t{1} << 31), "zipf_ids: rows ", rows, " outside [1, 2^31)");
  std::vector<double> cumulative(static_cast<size_t>(rows));
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) cumulative[static_cast<size_t>(r)] = total += std::pow(r + 1.0, -exponent);
  int64_t stride = 2654435761 % rows;  // rank → row: r · stride mod rows, a bijection when gcd(stride, rows) = 1
  while (std::gcd(stride, rows) != 1) ++stride;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, total);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) {
    const auto rank = std::min<int64_t>(
        std::lower_bound(cumulative.begin(), cumulative.end(), uniform(rng)) - cumulative.begin(), rows - 1);
    id = static_cast<int32_t>(rank * stride % rows);
  }
  return ids;
}

}  // namespace gpt
