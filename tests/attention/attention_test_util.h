#pragma once
// Small helpers shared by the attention-family tests.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/rotary.h"
#include "kernels/tensor.h"
#include "tests/common/gradcheck.h"

namespace gpt::attention_test {

inline Tensor cu_tensor(const std::vector<int32_t>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i32);
  int32_t* p = t.data<int32_t>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

// Rotary cos/sin tables [P, D/4] after one YaRN event (non-trivial frequencies).
struct RotaryTableSet {
  Tensor cos, sin;
};
inline RotaryTableSet yarn_tables(int64_t head_dim, int64_t positions, DType dtype) {
  RotaryTables t(head_dim, positions);
  t.apply_yarn(16, 48);
  return {t.cos_table(dtype), t.sin_table(dtype)};
}

// Segment id of every token, computed by walking the boundaries (independent of kernels/cpu/segments.h).
inline std::vector<int> segment_ids(const std::vector<int32_t>& cu, int64_t tokens) {
  std::vector<int> id(static_cast<size_t>(tokens), -1);
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    for (int32_t t = cu[i]; t < cu[i + 1]; ++t) id[static_cast<size_t>(t)] = static_cast<int>(i);
  }
  return id;
}

// The same bf16-representable values as f64 and as `dtype` (so that precision tests compare the op's
// arithmetic, not the input rounding).
struct TwinTensor {
  Tensor exact;  // f64
  Tensor low;    // dtype
};
inline TwinTensor twin_random(const Shape& shape, DType dtype, uint64_t seed, double scale = 1.0) {
  Tensor rounded = testing::random_tensor(shape, DType::bf16, seed, scale);
  return {rounded.to(DType::f64), rounded.to(dtype)};
}

inline void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rel_tol,
                         const char* what) {
  EXPECT_LT(testing::max_relative_error(got, want), rel_tol) << what;
}

}  // namespace gpt::attention_test
