// CUDA masked validation loss (kernels/masked_validation_loss.h, RECIPE §S.6) against the CPU reference, on a small
// vocabulary and on the `ext` / `mini-ext` head (d = 768, V = 50304, a mask of V rows of ⌈V/8⌉ bytes).
// Tolerances: the per-row losses differ by the fixed shift 23 against a running max, the summation order and the
// device's exp/log, a few fp32 ulp of a loss of order 10 each; the rows are added in double in the same order on both
// backends, so the sum is held to 1e-5 relative (f32 accumulation; f64 inputs: 1e-12). An all-zero mask must give the
// CUDA unmasked validation loss bit for bit (one kernel for both).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/masked_validation_loss.h"
#include "kernels/softcap_loss.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt {
namespace {

using gpu_testing::bit_mismatches;
using gpu_testing::poison;

constexpr int64_t kModelDim = 768, kVocab = 50304;

double tolerance_of(DType dtype) { return dtype == DType::f64 ? 1e-12 : 1e-5; }

struct Inputs {
  Tensor inputs, targets, mask;  // CPU tensors
};

// T rows with random inputs and targets, and a mask over `vocab` columns whose rows used by the inputs have each bit
// set with probability 1/4 (the other rows stay zero). every_target_masked: each row's own target is masked too.
Inputs random_inputs(int64_t rows, int64_t vocab, uint64_t seed, bool every_target_masked = false) {
  std::mt19937_64 rng(seed);
  Inputs in;
  in.inputs = Tensor::empty({rows}, DType::i32);
  in.targets = Tensor::empty({rows}, DType::i64);
  const int64_t row_bytes = (vocab + 7) / 8;
  in.mask = Tensor::zeros({vocab, row_bytes}, DType::u8);
  auto* bits = static_cast<uint8_t*>(in.mask.raw());
  for (int64_t t = 0; t < rows; ++t) {
    const auto x = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    const auto y = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
    in.inputs.data<int32_t>()[t] = x;
    in.targets.data<int64_t>()[t] = y;
    uint8_t* row = bits + x * row_bytes;
    for (int64_t b = 0; b < row_bytes; ++b) row[b] = static_cast<uint8_t>(rng() & rng());
    if (vocab % 8 != 0) row[row_bytes - 1] &= static_cast<uint8_t>((1u << (vocab % 8)) - 1);
    if (every_target_masked) row[y / 8] |= static_cast<uint8_t>(1u << (y % 8));
  }
  if (every_target_masked) {  // a later row with the same input must not clear an earlier row's target bit
    for (int64_t t = 0; t < rows; ++t) {
      const int64_t y = in.targets.data<int64_t>()[t];
      bits[in.inputs.data<int32_t>()[t] * row_bytes + y / 8] |= static_cast<uint8_t>(1u << (y % 8));
    }
  }
  return in;
}

double rows_add(const Tensor& z_raw, const Inputs& in, Device device) {
  Tensor sum = Tensor::zeros({1}, stat_dtype(z_raw.dtype()), device);
  masked_validation_loss_rows_add(z_raw.to(device), in.inputs.to(device), in.targets.to(device), in.mask.to(device),
                                  sum);
  return sum.to_doubles()[0];
}

class MaskedValidationLossCuda : public ::testing::TestWithParam<DType> {};

// The backend piece on logits of the size the recipe's softcap sees (z_raw of a few units).
TEST_P(MaskedValidationLossCuda, RowsAddMatchesCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  struct Shape2 {
    int64_t rows, vocab;
  };
  for (const Shape2 s : {Shape2{5, 37}, Shape2{64, 512}, Shape2{256, kVocab}}) {
    for (bool targets_masked : {false, true}) {
      const Tensor z_raw = testing::random_tensor({s.rows, s.vocab}, dtype, 1, 4.0);
      const Inputs in = random_inputs(s.rows, s.vocab, 2, targets_masked);
      const double cpu = rows_add(z_raw, in, Device::cpu);
      const double gpu = rows_add(z_raw, in, Device::cuda);
      EXPECT_LT(std::abs(gpu - cpu) / std::abs(cpu), tolerance_of(dtype))
          << s.rows << "×" << s.vocab << (targets_masked ? " targets masked" : "") << ": cpu " << cpu << " cuda "
          << gpu;
      if (targets_masked) {
        EXPECT_GT(cpu / static_cast<double>(s.rows), 60.0);  // −60 at the target costs ≥ 60
      }
    }
  }
}

// One kernel serves both: with no bit set the masked loss is the unmasked CUDA loss, bit for bit; with bits set it
// is not (the mask is read).
TEST_P(MaskedValidationLossCuda, ZeroMaskIsTheUnmaskedLossBitForBit) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const Tensor z_raw = testing::random_tensor({128, kVocab}, dtype, 3, 4.0).to(Device::cuda);
  Inputs in = random_inputs(128, kVocab, 4);
  Tensor masked_sum = Tensor::zeros({1}, stat_dtype(dtype), Device::cuda);
  masked_validation_loss_rows_add(z_raw, in.inputs.to(Device::cuda), in.targets.to(Device::cuda),
                                  in.mask.to(Device::cuda), masked_sum);
  in.mask.zero_();
  Tensor zero_mask_sum = Tensor::zeros({1}, stat_dtype(dtype), Device::cuda);
  masked_validation_loss_rows_add(z_raw, in.inputs.to(Device::cuda), in.targets.to(Device::cuda),
                                  in.mask.to(Device::cuda), zero_mask_sum);
  Tensor unmasked_sum = Tensor::zeros({1}, stat_dtype(dtype), Device::cuda);
  validation_loss_rows_add(z_raw, in.targets.to(Device::cuda), unmasked_sum);
  EXPECT_EQ(bit_mismatches(zero_mask_sum, unmasked_sum), 0);
  EXPECT_NE(masked_sum.to_doubles()[0], unmasked_sum.to_doubles()[0]);
}

// The whole op (chunked gemm, then the rows) on the seed head: loss_sum is overwritten (NaN-poisoned first), and
// several chunks, the last one short, add into it.
TEST_P(MaskedValidationLossCuda, SeedHeadMatchesCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const int64_t rows = 300;
  const Tensor h = testing::random_tensor({rows, kModelDim}, dtype, 5, 1.0);
  const Tensor lm_head = testing::random_tensor({kModelDim, kVocab}, dtype, 6, 0.1);
  const Inputs in = random_inputs(rows, kVocab, 7);
  Tensor sum_cpu = Tensor::empty({1}, stat_dtype(dtype));
  Tensor sum_gpu = Tensor::empty({1}, stat_dtype(dtype), Device::cuda);
  poison(sum_cpu);
  poison(sum_gpu);
  masked_validation_loss(h, lm_head, in.inputs, in.targets, in.mask, 128, sum_cpu);
  masked_validation_loss(h.to(Device::cuda), lm_head.to(Device::cuda), in.inputs.to(Device::cuda),
                         in.targets.to(Device::cuda), in.mask.to(Device::cuda), 128, sum_gpu);
  const double cpu = sum_cpu.to_doubles()[0], gpu = sum_gpu.to_doubles()[0];
  // bf16 logits come out of two different gemms: each z_raw may differ by a bf16 rounding (2^-8 relative), which
  // moves a row's loss by far less than 1e-3 of it.
  const double tolerance = dtype == DType::bf16 ? 1e-3 : tolerance_of(dtype) * 10;
  EXPECT_LT(std::abs(gpu - cpu) / std::abs(cpu), tolerance) << "cpu " << cpu << " cuda " << gpu;
}

// Bad inputs (an error on the CPU) make the CUDA sum NaN instead of reading outside the mask or the row.
TEST_P(MaskedValidationLossCuda, InputWithoutMaskRowOrTargetOutsideVocabGivesNan) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const Tensor z_raw = testing::random_tensor({4, 64}, dtype, 8, 4.0);
  for (int bad = 0; bad < 2; ++bad) {
    Inputs in = random_inputs(4, 64, 9);
    if (bad == 0) in.inputs.data<int32_t>()[2] = 64;  // the mask has 64 rows
    if (bad == 1) in.targets.data<int64_t>()[1] = 64;
    EXPECT_TRUE(std::isnan(rows_add(z_raw, in, Device::cuda))) << (bad == 0 ? "input" : "target");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MaskedValidationLossCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace gpt
