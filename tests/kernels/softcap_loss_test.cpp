#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/fp8.h"
#include "kernels/gemm.h"
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

double sigmoid(double a) { return 1 / (1 + std::exp(-a)); }
// Softcap slope at z_raw = 0: (23/7.5)·s(1−s) with s = σ(5/7.5).
double slope_at_zero() {
  const double s = sigmoid(5.0 / 7.5);
  return 23.0 / 7.5 * s * (1 - s);
}

struct LossRun {
  double loss;
  std::vector<double> dz;
};
LossRun run_train(const Tensor& z_raw, const std::vector<int64_t>& targets, const Tensor& prefix,
                  const TrainLossConfig& config) {
  Tensor loss = Tensor::empty({1}, stat_dtype(z_raw.dtype()));
  Tensor dz = Tensor::empty(z_raw.shape(), z_raw.dtype());
  softcap_train_loss(z_raw, i64_tensor(targets), prefix, config, loss, dz);
  return {loss.to_doubles()[0], dz.to_doubles()};
}

TEST(SoftcapLoss, UniformLogitsGiveLogVPerPrediction) {
  const int64_t vocab = 7;
  Tensor z = Tensor::zeros({3, vocab}, DType::f64);
  const LossRun r = run_train(z, {1, 2, 3}, Tensor(), {.mtp_weights = {1.0f}, .loss_scale = 0.5f});
  EXPECT_NEAR(r.loss, 0.5 * 3 * std::log(7.0), 1e-12);
}

// A NaN logit (weights gone non-finite) must give a NaN loss, not a finite one: the run stops on it.
TEST(SoftcapLoss, NanLogitGivesNanLoss) {
  for (const DType dtype : {DType::f64, DType::f32, DType::bf16}) {
    Tensor z = random_tensor({3, 11}, dtype, 5, 4.0);
    Tensor z64 = z.to(DType::f64);
    z64.data<double>()[1 * 11 + 6] = std::nan("");
    const LossRun r = run_train(z64.to(dtype), {1, 2, 3}, Tensor(), {.mtp_weights = {1.0f}});
    EXPECT_TRUE(std::isnan(r.loss)) << dtype_name(dtype);
  }
}

TEST(SoftcapLoss, TargetsBeyondEndDroppedFromLoss) {
  // T = 2, n = 3: row 0 keeps predictions k = 0, 1 (weights 1, 0.5), row 1 only k = 0.
  const int64_t vocab = 5;
  Tensor z = Tensor::zeros({2, vocab}, DType::f64);
  const LossRun r = run_train(z, {4, 0}, Tensor(), {.mtp_weights = {1.0f, 0.5f, 0.25f}});
  EXPECT_NEAR(r.loss, 2.5 * std::log(5.0), 1e-12);
}

TEST(SoftcapLoss, MtpGradientPastBatchEndUsesAllWeights) {
  // Last row: S_w = 1 + 0.5 + 0.25 = 1.75 although only w_0 has a target, so Σ_v ∂/∂z = 0.75 instead of 0.
  const int64_t vocab = 5;
  Tensor z = Tensor::zeros({2, vocab}, DType::f64);
  const float scale = 0.25f;
  const LossRun r = run_train(z, {4, 3}, Tensor(), {.mtp_weights = {1.0f, 0.5f, 0.25f}, .loss_scale = scale});
  const double k = scale * slope_at_zero();
  EXPECT_NEAR(r.dz[vocab + 3], k * (1.75 / vocab - 1.0), 1e-14);
  EXPECT_NEAR(r.dz[vocab + 0], k * (1.75 / vocab), 1e-14);
  double row_sum = 0;
  for (int64_t v = 0; v < vocab; ++v) row_sum += r.dz[vocab + v];
  EXPECT_NEAR(row_sum, k * 0.75, 1e-14);
  // Row 0: targets 4 (w 1) and 3 (w 0.5) present, w 0.25 dropped but still in S_w.
  EXPECT_NEAR(r.dz[4], k * (1.75 / vocab - 1.0), 1e-14);
  EXPECT_NEAR(r.dz[3], k * (1.75 / vocab - 0.5), 1e-14);
}

TEST(SoftcapLoss, PrefixTermUsesPrefixOfFirstTarget) {
  const int64_t vocab = 4;
  Tensor z = Tensor::zeros({2, vocab}, DType::f64);
  Tensor prefix = i64_tensor({-1, 0, -1, 2});  // prefix(1) = 0, prefix(3) = 2
  const LossRun r = run_train(z, {1, 2}, prefix, {.mtp_weights = {1.0f}, .prefix_weight = 0.25f});
  // Row 0 (y = 1, P = 0): (1 + 0.25)·log 4; row 1 (y = 2, P = −1): log 4.
  EXPECT_NEAR(r.loss, 2.25 * std::log(4.0), 1e-12);
  const double k = slope_at_zero();
  EXPECT_NEAR(r.dz[0], k * (1.25 / vocab - 0.25), 1e-14);
  EXPECT_NEAR(r.dz[vocab + 0], k * (1.0 / vocab), 1e-14);  // no prefix: S_w = 1
}

TEST(SoftcapLoss, GradientMatchesFiniteDifferencesWhereAllTargetsArePresent) {
  const int64_t rows = 4, vocab = 6;
  Tensor z = random_tensor({rows, vocab}, DType::f64, 1, 4.0);
  Tensor prefix = i64_tensor({-1, 0, 1, -1, 3, 2});
  const std::vector<int64_t> targets = {4, 1, 5, 2};
  const TrainLossConfig config{.mtp_weights = {1.0f, 0.5f}, .prefix_weight = 0.25f, .loss_scale = 0.5f};
  const LossRun r = run_train(z, targets, prefix, config);
  auto loss = [&] { return run_train(z, targets, prefix, config).loss; };
  const auto fd = testing::numeric_gradient(loss, z);
  const std::vector<double> head_fd(fd.begin(), fd.begin() + (rows - 1) * vocab);
  const std::vector<double> head(r.dz.begin(), r.dz.begin() + (rows - 1) * vocab);
  EXPECT_LT(testing::max_relative_error(head, head_fd), 1e-7);
  // Last row: the kernel's gradient exceeds the exact one by loss_scale·w_1·p_v·slope_v (the dropped weight).
  const auto zv = z.to_doubles();
  std::vector<double> capped(vocab);
  double m = -1e300, sum = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    capped[v] = 23 * sigmoid((zv[(rows - 1) * vocab + v] + 5) / 7.5);
    m = std::max(m, capped[v]);
  }
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(capped[v] - m);
  for (int64_t v = 0; v < vocab; ++v) {
    const double p = std::exp(capped[v] - m) / sum, s = capped[v] / 23;
    const double excess = 0.5 * 0.5 * p * 23 / 7.5 * s * (1 - s);
    EXPECT_NEAR(r.dz[(rows - 1) * vocab + v] - fd[(rows - 1) * vocab + v], excess, 1e-8) << "v = " << v;
  }
}

TEST(SoftcapLoss, Bf16AgreesWithF64WithinBf16Tolerance) {
  const int64_t rows = 8, vocab = 64;
  Tensor z = random_tensor({rows, vocab}, DType::f64, 2, 5.0);
  const std::vector<int64_t> targets = {1, 7, 63, 0, 5, 5, 9, 30};
  const TrainLossConfig config{.mtp_weights = {1.0f, 0.5f, 0.25f}, .loss_scale = 0.125f};
  const LossRun exact = run_train(z, targets, Tensor(), config);
  const LossRun rounded = run_train(z.to(DType::bf16), targets, Tensor(), config);
  EXPECT_NEAR(rounded.loss, exact.loss, 2e-2 * std::abs(exact.loss));
  EXPECT_LT(testing::max_relative_error(rounded.dz, exact.dz), 3e-2);
}

TEST(SoftcapLoss, E5m2GradientIsScaledQuantizedFp32Gradient) {
  const int64_t rows = 3, vocab = 16;
  Tensor z = random_tensor({rows, vocab}, DType::f32, 3, 5.0);
  Tensor targets = i64_tensor({3, 9, 15});
  const TrainLossConfig config{.mtp_weights = {1.0f, 0.5f}, .loss_scale = 0.5f, .grad_scale = 0.5f * 0.75f / 448};
  Tensor loss32 = Tensor::empty({1}, DType::f32), loss8 = Tensor::empty({1}, DType::f32);
  Tensor dz32 = Tensor::empty({rows, vocab}, DType::f32), g8 = Tensor::empty({rows, vocab}, DType::e5m2);
  softcap_train_loss(z, targets, Tensor(), config, loss32, dz32);
  softcap_train_loss(z, targets, Tensor(), config, loss8, g8);
  EXPECT_EQ(loss32.to_doubles(), loss8.to_doubles());
  const auto* bits = static_cast<const uint8_t*>(g8.raw());
  const float* ref = dz32.data<float>();
  for (int64_t i = 0; i < rows * vocab; ++i) EXPECT_EQ(bits[i], float_to_e5m2(ref[i] / config.grad_scale)) << i;
}

TEST(SoftcapLoss, RejectsBadTargetsAndConfig) {
  Tensor z = Tensor::zeros({2, 4}, DType::f32);
  Tensor loss = Tensor::empty({1}, DType::f32), dz = Tensor::empty({2, 4}, DType::f32);
  EXPECT_THROW(softcap_train_loss(z, i64_tensor({0, 4}), Tensor(), {.mtp_weights = {1.0f}}, loss, dz), Error);
  EXPECT_THROW(softcap_train_loss(z, i64_tensor({0, 1}), Tensor(), {}, loss, dz), Error);
  EXPECT_THROW(softcap_train_loss(z, i64_tensor({0, 1}), i64_tensor({0, 1, 2, 4}), {.mtp_weights = {1.0f}}, loss, dz),
               Error);
  Tensor dz_e4m3 = Tensor::empty({2, 4}, DType::e4m3);
  EXPECT_THROW(softcap_train_loss(z, i64_tensor({0, 1}), Tensor(), {.mtp_weights = {1.0f}}, loss, dz_e4m3), Error);
}

double direct_validation_loss(const Tensor& h, const Tensor& lm_head, const std::vector<int64_t>& y) {
  Tensor z = Tensor::empty({h.size(0), lm_head.size(1)}, DType::f64);
  gemm(h, lm_head, z);
  const auto zv = z.to_doubles();
  const int64_t vocab = lm_head.size(1);
  double total = 0;
  for (int64_t t = 0; t < h.size(0); ++t) {
    double m = -1e300, sum = 0;
    std::vector<double> c(vocab);
    for (int64_t v = 0; v < vocab; ++v) m = std::max(m, c[v] = 23 * sigmoid((zv[t * vocab + v] + 5) / 7.5));
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(c[v] - m);
    total += m + std::log(sum) - c[y[t]];
  }
  return total;
}

TEST(ValidationLoss, ZeroHiddenStateGivesLogV) {
  Tensor h = Tensor::zeros({5, 3}, DType::f64);
  Tensor lm_head = random_tensor({3, 11}, DType::f64, 4);
  Tensor sum = Tensor::empty({1}, DType::f64);
  validation_loss(h, lm_head, i64_tensor({0, 1, 2, 3, 10}), 2, sum);
  EXPECT_NEAR(sum.to_doubles()[0], 5 * std::log(11.0), 1e-12);
}

TEST(ValidationLoss, ChunkSizeDoesNotChangeTheSum) {
  const int64_t rows = 7, d = 4, vocab = 9;
  Tensor h = random_tensor({rows, d}, DType::f64, 5, 2.0);
  Tensor lm_head = random_tensor({d, vocab}, DType::f64, 6, 2.0);
  const std::vector<int64_t> y = {0, 8, 3, 3, 1, 7, 2};
  const double expected = direct_validation_loss(h, lm_head, y);
  for (int64_t chunk : {1, 3, 7, 100}) {
    Tensor sum = Tensor::empty({1}, DType::f64);
    validation_loss(h, lm_head, i64_tensor(y), chunk, sum);
    EXPECT_NEAR(sum.to_doubles()[0], expected, 1e-12) << "chunk " << chunk;
  }
}

TEST(ValidationLoss, Bf16AgreesWithF64) {
  const int64_t rows = 6, d = 8, vocab = 32;
  Tensor h = random_tensor({rows, d}, DType::f64, 7);
  Tensor lm_head = random_tensor({d, vocab}, DType::f64, 8);
  const std::vector<int64_t> y = {5, 6, 7, 8, 9, 31};
  Tensor exact = Tensor::empty({1}, DType::f64), approx = Tensor::empty({1}, DType::f32);
  validation_loss(h, lm_head, i64_tensor(y), 4, exact);
  validation_loss(h.to(DType::bf16), lm_head.to(DType::bf16), i64_tensor(y), 4, approx);
  EXPECT_NEAR(approx.to_doubles()[0], exact.to_doubles()[0], 2e-2 * exact.to_doubles()[0]);
}

TEST(ValidationLoss, RejectsZeroChunk) {
  Tensor h = Tensor::zeros({2, 3}, DType::f32), w = Tensor::zeros({3, 4}, DType::f32);
  Tensor sum = Tensor::empty({1}, DType::f32);
  EXPECT_THROW(validation_loss(h, w, i64_tensor({0, 1}), 0, sum), Error);
}

}  // namespace
}  // namespace gpt
