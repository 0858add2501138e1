#pragma once
// Input checks shared by the statistics functions: every sample must be non-empty and finite, so a
// NaN from a crashed run never turns into a silently wrong p-value.
#include <cmath>
#include <cstddef>
#include <span>

#include "base/check.h"

namespace gpt::harness::stats::detail {

inline void require_sample(std::span<const double> x, size_t min_size, const char* function, const char* argument) {
  GPT_CHECK(x.size() >= min_size, function, ": ", argument, " needs at least ", min_size, " values, got ", x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    GPT_CHECK(std::isfinite(x[i]), function, ": ", argument, "[", i, "] must be finite, got ", x[i]);
  }
}

inline void require_probability(double p, const char* function, const char* argument) {
  GPT_CHECK(p > 0.0 && p < 1.0, function, ": ", argument, " must be in (0, 1), got ", p);
}

}  // namespace gpt::harness::stats::detail
