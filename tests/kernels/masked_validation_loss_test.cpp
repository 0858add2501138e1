// RECIPE §S.6 masked validation loss (kernels/masked_validation_loss.h) against an f64 computation written here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/check.h"
#include "kernels/gemm.h"
#include "kernels/masked_validation_loss.h"
#include "kernels/softcap_loss.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

Tensor i64_tensor(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i64);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}
Tensor i32_tensor(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

// A mask of `rows` rows over `vocab` columns (row bytes vocab/8) with bit (p, x) set where masked[p][x].
Tensor mask_tensor(const std::vector<std::vector<bool>>& masked, int64_t vocab) {
  const auto rows = static_cast<int64_t>(masked.size());
  Tensor t = Tensor::zeros({rows, vocab / 8}, DType::u8);
  auto* bytes = static_cast<uint8_t*>(t.raw());
  for (int64_t p = 0; p < rows; ++p) {
    for (int64_t x = 0; x < vocab; ++x) {
      if (masked[p][x]) bytes[p * (vocab / 8) + x / 8] |= static_cast<uint8_t>(1u << (x % 8));
    }
  }
  return t;
}

// Σ_t [lse(z_t) − z_t,y] with z = 23·σ((z_raw + 5)/7.5) or −60 where masked[input_t][v], all in f64.
double direct_masked_loss(const Tensor& h, const Tensor& lm_head, const std::vector<int32_t>& inputs,
                          const std::vector<int64_t>& y, const std::vector<std::vector<bool>>& masked) {
  const int64_t rows = h.size(0), d = h.size(1), vocab = lm_head.size(1);
  const auto hv = h.to_doubles(), wv = lm_head.to_doubles();
  double total = 0;
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<double> z(static_cast<size_t>(vocab));
    double m = -1e300;
    for (int64_t v = 0; v < vocab; ++v) {
      double raw = 0;
      for (int64_t k = 0; k < d; ++k) raw += hv[t * d + k] * wv[k * vocab + v];
      z[v] = masked[inputs[t]][v] ? -60.0 : 23.0 / (1.0 + std::exp(-(raw + 5.0) / 7.5));
      m = std::max(m, z[v]);
    }
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(z[v] - m);
    total += m + std::log(sum) - z[y[t]];
  }
  return total;
}

struct Case {
  int64_t rows = 0, d = 0, vocab = 0;
  std::vector<int32_t> inputs;
  std::vector<int64_t> targets;
  std::vector<std::vector<bool>> masked;  // [vocab][vocab], never (input_t, y_t)
};

Case random_case(int64_t rows, int64_t d, int64_t vocab, uint64_t seed) {
  Case c{rows, d, vocab, {}, {}, {}};
  std::mt19937_64 rng(seed);
  c.masked.assign(static_cast<size_t>(vocab), std::vector<bool>(static_cast<size_t>(vocab)));
  for (auto& row : c.masked) {
    for (size_t x = 0; x < row.size(); ++x) row[x] = rng() % 3 == 0;
  }
  for (int64_t t = 0; t < rows; ++t) {
    c.inputs.push_back(static_cast<int32_t>(rng() % vocab));
    c.targets.push_back(static_cast<int64_t>(rng() % vocab));
    c.masked[c.inputs.back()][c.targets.back()] = false;  // as in canonical text
  }
  return c;
}

double masked_sum(const Tensor& h, const Tensor& w, const Case& c, int64_t chunk) {
  Tensor sum = Tensor::empty({1}, stat_dtype(h.dtype()));
  masked_validation_loss(h, w, i32_tensor(c.inputs), i64_tensor(c.targets), mask_tensor(c.masked, c.vocab), chunk, sum);
  return sum.to_doubles()[0];
}

TEST(MaskedValidationLoss, F64EqualsDirectComputation) {
  const Case c = random_case(9, 5, 40, 1);
  Tensor h = random_tensor({c.rows, c.d}, DType::f64, 2, 2.0);
  Tensor w = random_tensor({c.d, c.vocab}, DType::f64, 3, 2.0);
  const double expected = direct_masked_loss(h, w, c.inputs, c.targets, c.masked);
  for (int64_t chunk : {1, 4, 9, 100}) EXPECT_NEAR(masked_sum(h, w, c, chunk), expected, 1e-11) << chunk;
}

TEST(MaskedValidationLoss, F32AgreesWithF64Computation) {
  const Case c = random_case(70, 8, 64, 4);  // >= 64 rows: the parallel path
  Tensor h = random_tensor({c.rows, c.d}, DType::f32, 5, 2.0);
  Tensor w = random_tensor({c.d, c.vocab}, DType::f32, 6, 2.0);
  const double expected = direct_masked_loss(h, w, c.inputs, c.targets, c.masked);
  EXPECT_NEAR(masked_sum(h, w, c, 16), expected, 1e-5 * std::abs(expected));
  // The mask matters: the unmasked loss differs by far more than the tolerance.
  Tensor plain = Tensor::empty({1}, DType::f32);
  validation_loss(h, w, i64_tensor(c.targets), 16, plain);
  EXPECT_GT(plain.to_doubles()[0] - expected, 1.0);
}

TEST(MaskedValidationLoss, AllZeroMaskIsBitwiseTheUnmaskedLoss) {
  for (const DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    Case c = random_case(130, 8, 96, 7);
    for (auto& row : c.masked) row.assign(row.size(), false);
    Tensor h = random_tensor({c.rows, c.d}, DType::f64, 8, 2.0).to(dtype);
    Tensor w = random_tensor({c.d, c.vocab}, DType::f64, 9, 2.0).to(dtype);
    for (int64_t chunk : {32, 130}) {
      Tensor plain = Tensor::empty({1}, stat_dtype(dtype));
      validation_loss(h, w, i64_tensor(c.targets), chunk, plain);
      const double masked = masked_sum(h, w, c, chunk);
      EXPECT_EQ(masked, plain.to_doubles()[0]) << dtype_name(dtype) << " chunk " << chunk;
    }
  }
}

TEST(MaskedValidationLoss, MaskedTargetCostsAboutSixtyPlusItsLogit) {
  // One row, one input: masking the target replaces z_y by −60 (the soundness the canonical mask must keep).
  Case c = random_case(1, 4, 16, 10);
  for (auto& row : c.masked) row.assign(row.size(), false);
  Tensor h = random_tensor({1, 4}, DType::f64, 11);
  Tensor w = random_tensor({4, 16}, DType::f64, 12);
  const double unmasked = masked_sum(h, w, c, 1);
  c.masked[c.inputs[0]][c.targets[0]] = true;
  const double masked = masked_sum(h, w, c, 1);
  EXPECT_NEAR(masked, direct_masked_loss(h, w, c.inputs, c.targets, c.masked), 1e-12);
  EXPECT_GT(masked - unmasked, 60.0);
}

TEST(MaskedValidationLoss, RejectsBadArguments) {
  const Case c = random_case(2, 3, 16, 13);
  Tensor h = Tensor::zeros({2, 3}, DType::f32), w = Tensor::zeros({3, 16}, DType::f32);
  Tensor sum = Tensor::empty({1}, DType::f32);
  const Tensor mask = mask_tensor(c.masked, 16);
  EXPECT_THROW(masked_validation_loss(h, w, i32_tensor({0, 16}), i64_tensor({0, 1}), mask, 4, sum), Error);
  EXPECT_THROW(masked_validation_loss(h, w, i32_tensor({0, 1}), i64_tensor({0, 16}), mask, 4, sum), Error);
  EXPECT_THROW(masked_validation_loss(h, w, i32_tensor({0, 1}), i64_tensor({0, 1}), Tensor(), 4, sum), Error);
  EXPECT_THROW(
      masked_validation_loss(h, w, i32_tensor({0, 1}), i64_tensor({0, 1}), Tensor::zeros({16, 2}, DType::f32), 4, sum),
      Error);
  EXPECT_THROW(masked_validation_loss(h, w, i32_tensor({0, 1}), i64_tensor({0, 1}), mask, 0, sum), Error);
  const Tensor narrow = Tensor::zeros({16, 1}, DType::u8);  // 8 columns < V = 16
  EXPECT_THROW(masked_validation_loss(h, w, i32_tensor({0, 1}), i64_tensor({0, 1}), narrow, 4, sum), Error);
}

}  // namespace
}  // namespace gpt
