// CUDA softcapped training loss (fwd + fused bwd, bf16/f32/f64 and e5m2 gradients) and validation rows against the
// CPU reference. The public op is tested as it dispatches; every version of kernels/cuda/softcap_loss_variants.h is
// also called by name on the same cases (duplicate target columns, row counts that are multiples of nothing, vocabs
// that v2 must refuse).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cuda/softcap_loss_variants.h"
#include "kernels/fp8.h"
#include "kernels/softcap_loss.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using testing::random_tensor;

struct LossCase {
  DType dtype;
  int64_t rows, vocab;
  bool prefix;
};

class SoftcapLossCuda : public ::testing::TestWithParam<LossCase> {};

Tensor make_prefix_table(int64_t vocab, uint64_t seed) {
  Tensor t = random_ids(vocab, -1, vocab, seed, DType::i64);  // about 1/V of the entries are −1 (no prefix)
  for (int64_t v = 0; v < vocab; v += 3) t.data<int64_t>()[v] = -1;
  return t;
}

TEST_P(SoftcapLossCuda, LossAndGradientMatchCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, vocab, with_prefix] = GetParam();
  const Tensor z = random_tensor({rows, vocab}, dtype, 91, 12.0);  // raw logits spanning the softcap's slope
  const Tensor y = random_ids(rows, 0, vocab, 92, DType::i64);
  const Tensor prefix = with_prefix ? make_prefix_table(vocab, 93) : Tensor{};
  TrainLossConfig cfg{.mtp_weights = {1.0f, 0.5f, 0.25f}, .prefix_weight = 0.3f, .loss_scale = 1.0f / 3.0f};
  const DType sd = stat_dtype(dtype);
  Tensor loss_cpu = Tensor::empty({1}, sd), dz_cpu = Tensor::empty({rows, vocab}, dtype);
  softcap_train_loss(z, y, prefix, cfg, loss_cpu, dz_cpu);
  Tensor loss_gpu = Tensor::empty({1}, sd, Device::cuda), dz_gpu = Tensor::empty({rows, vocab}, dtype, Device::cuda);
  poison(loss_gpu);
  poison(dz_gpu);
  softcap_train_loss(gpu(z), gpu(y), with_prefix ? gpu(prefix) : Tensor{}, cfg, loss_gpu, dz_gpu);
  const double loss_tol = dtype == DType::f64 ? 1e-12 : 1e-5;
  EXPECT_LT(rel_error(loss_gpu, loss_cpu), loss_tol);
  EXPECT_LT(rel_error(dz_gpu, dz_cpu), tolerance_for(dtype));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftcapLossCuda,
                         ::testing::Values(LossCase{DType::f64, 7, 333, true}, LossCase{DType::f32, 7, 333, true},
                                           LossCase{DType::bf16, 7, 333, false}, LossCase{DType::bf16, 5, 64, true},
                                           LossCase{DType::f32, 64, 50304, true},
                                           LossCase{DType::bf16, 2048, 50304, true}));

TEST(SoftcapLossCuda, E5m2GradientMatchesCpuBits) {
  GPT_REQUIRE_CUDA_DEVICE();
  const int64_t rows = 33, vocab = 50304;
  const Tensor z = random_tensor({rows, vocab}, DType::bf16, 94, 12.0);
  const Tensor y = random_ids(rows, 0, vocab, 95, DType::i64);
  TrainLossConfig cfg{.mtp_weights = {1.0f, 0.5f}, .loss_scale = 1.0f / 8.0f, .grad_scale = 0.75f / 448.0f / 8.0f};
  Tensor loss_cpu = Tensor::empty({1}, DType::f32), g_cpu = Tensor::empty({rows, vocab}, DType::e5m2);
  softcap_train_loss(z, y, Tensor{}, cfg, loss_cpu, g_cpu);
  Tensor loss_gpu = Tensor::empty({1}, DType::f32, Device::cuda);
  Tensor g_gpu = Tensor::empty({rows, vocab}, DType::e5m2, Device::cuda);
  GPT_CUDA_CHECK(cudaMemset(g_gpu.raw(), 0x7F, g_gpu.nbytes()));  // NaN bytes: unwritten entries fail
  softcap_train_loss(gpu(z), gpu(y), Tensor{}, cfg, loss_gpu, g_gpu);
  EXPECT_LT(rel_error(loss_gpu, loss_cpu), 1e-5);
  const Tensor back = g_gpu.to(Device::cpu);
  const auto* a = static_cast<const uint8_t*>(back.raw());
  const auto* b = static_cast<const uint8_t*>(g_cpu.raw());
  std::vector<double> ga(static_cast<size_t>(rows * vocab)), gb(ga.size());
  int64_t differing = 0;
  for (size_t i = 0; i < ga.size(); ++i) {
    ga[i] = e5m2_to_float(a[i]);
    gb[i] = e5m2_to_float(b[i]);
    differing += a[i] != b[i];
  }
  // Only elements whose fp32 value sits at an e5m2 rounding tie may land one code apart.
  EXPECT_LT(relative_frobenius(ga, gb), 2e-2);
  EXPECT_LT(static_cast<double>(differing) / static_cast<double>(ga.size()), 1e-2);
}

// ---- numbered versions -------------------------------------------------------------------------------------------

using TrainLossFn = void (*)(const Tensor&, const Tensor&, const Tensor&, const TrainLossConfig&, Tensor&, Tensor&);

struct TrainLossVersion {
  const char* name;
  TrainLossFn fn;
};
constexpr TrainLossVersion kTrainLossVersions[] = {{"v1", cuda::softcap_train_loss_v1},
                                                   {"v2", cuda::softcap_train_loss_v2}};

enum class Targets { random, duplicates };

struct VersionCase {
  DType dtype;
  int64_t rows, vocab;
  bool prefix, e5m2;
  Targets targets;
};

struct LossInputs {
  Tensor z, y, prefix;
  TrainLossConfig cfg;
};

// Duplicates: targets in {0, 1, 2}, so the three MTP targets of a row often coincide, and a prefix table that maps
// them onto each other (0 → none, 1 → 2, 2 → 0), so the prefix target often equals an MTP target as well.
LossInputs make_inputs(const VersionCase& c, uint64_t seed) {
  LossInputs in;
  in.z = random_tensor({c.rows, c.vocab}, c.dtype, seed, 12.0);
  const bool dup = c.targets == Targets::duplicates;
  in.y = random_ids(c.rows, 0, dup ? 3 : c.vocab, seed + 1, DType::i64);
  if (c.prefix) {
    in.prefix = make_prefix_table(c.vocab, seed + 2);
    if (dup) {
      int64_t* p = in.prefix.data<int64_t>();
      p[0] = -1;
      p[1] = 2;
      p[2] = 0;
    }
  }
  in.cfg = c.e5m2
               ? TrainLossConfig{.mtp_weights = {1.0f, 0.5f, 0.25f},
                                 .prefix_weight = 0.3f,
                                 .loss_scale = 1.0f / 8.0f,
                                 .grad_scale = 0.75f / 448.0f / 8.0f}
               : TrainLossConfig{.mtp_weights = {1.0f, 0.5f, 0.25f}, .prefix_weight = 0.3f, .loss_scale = 1.0f / 3.0f};
  return in;
}

std::vector<double> e5m2_values(const Tensor& t, int64_t* differing_from = nullptr, const Tensor* other = nullptr) {
  const Tensor host = t.is_cpu() ? t : t.to(Device::cpu);
  const auto* a = static_cast<const uint8_t*>(host.raw());
  std::vector<double> out(static_cast<size_t>(host.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = e5m2_to_float(a[i]);
  if (differing_from != nullptr) {
    const auto* b = static_cast<const uint8_t*>(other->raw());
    *differing_from = 0;
    for (size_t i = 0; i < out.size(); ++i) *differing_from += a[i] != b[i];
  }
  return out;
}

// Runs fn on the GPU copies of the case's inputs and compares loss and dz_raw with the CPU reference: loss 1e-5
// relative (f64 1e-12); dz_raw within tolerance_for(dtype) (relative Frobenius); e5m2 as in E5m2GradientMatchesCpuBits
// (2e-2 relative Frobenius of the decoded values, fewer than 1% of the codes different).
void expect_version_matches_cpu(TrainLossFn fn, const VersionCase& c) {
  const LossInputs in = make_inputs(c, 101);
  const DType sd = stat_dtype(c.dtype), gd = c.e5m2 ? DType::e5m2 : c.dtype;
  Tensor loss_cpu = Tensor::empty({1}, sd), dz_cpu = Tensor::empty({c.rows, c.vocab}, gd);
  softcap_train_loss(in.z, in.y, in.prefix, in.cfg, loss_cpu, dz_cpu);
  Tensor loss_gpu = Tensor::empty({1}, sd, Device::cuda), dz_gpu = Tensor::empty({c.rows, c.vocab}, gd, Device::cuda);
  poison(loss_gpu);
  GPT_CUDA_CHECK(cudaMemset(dz_gpu.raw(), c.e5m2 ? 0x7F : 0xFF, dz_gpu.nbytes()));  // NaN: unwritten entries fail
  fn(gpu(in.z), gpu(in.y), c.prefix ? gpu(in.prefix) : Tensor{}, in.cfg, loss_gpu, dz_gpu);
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_LT(rel_error(loss_gpu, loss_cpu), c.dtype == DType::f64 ? 1e-12 : 1e-5);
  if (c.e5m2) {
    int64_t differing = 0;
    const std::vector<double> ga = e5m2_values(dz_gpu, &differing, &dz_cpu), gb = e5m2_values(dz_cpu);
    EXPECT_LT(relative_frobenius(ga, gb), 2e-2);
    EXPECT_LT(static_cast<double>(differing) / static_cast<double>(ga.size()), 1e-2);
  } else {
    EXPECT_LT(rel_error(dz_gpu, dz_cpu), tolerance_for(c.dtype));
  }
}

std::string case_name(const VersionCase& c) {
  return std::string(dtype_name(c.dtype)) + "_" + std::to_string(c.rows) + "x" + std::to_string(c.vocab) +
         (c.prefix ? "_prefix" : "") + (c.e5m2 ? "_e5m2" : "") + (c.targets == Targets::duplicates ? "_dup" : "");
}

// Cases v2 supports (checked), each run through every version.
class SoftcapVersionsCuda : public ::testing::TestWithParam<VersionCase> {};

TEST_P(SoftcapVersionsCuda, EveryVersionMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const VersionCase c = GetParam();
  {
    const Tensor z = Tensor::empty({c.rows, c.vocab}, c.dtype, Device::cuda);
    const Tensor dz = Tensor::empty({c.rows, c.vocab}, c.e5m2 ? DType::e5m2 : c.dtype, Device::cuda);
    ASSERT_TRUE(cuda::softcap_train_v2_supports(z, dz)) << case_name(c);
  }
  for (const TrainLossVersion& v : kTrainLossVersions) {
    SCOPED_TRACE(v.name);
    expect_version_matches_cpu(v.fn, c);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftcapVersionsCuda,
                         ::testing::Values(VersionCase{DType::bf16, 257, 50304, true, false, Targets::random},
                                           VersionCase{DType::bf16, 37, 50304, false, true, Targets::random},
                                           VersionCase{DType::bf16, 45, 50304, true, false, Targets::duplicates},
                                           VersionCase{DType::bf16, 61, 50304, true, true, Targets::duplicates},
                                           VersionCase{DType::bf16, 1, 50304, true, false, Targets::random},
                                           VersionCase{DType::bf16, 9, 64, true, false, Targets::duplicates},
                                           VersionCase{DType::bf16, 11, 8200, false, true, Targets::duplicates},
                                           VersionCase{DType::f32, 13, 50304, true, false, Targets::duplicates},
                                           VersionCase{DType::f32, 5, 1000, true, true, Targets::random},
                                           VersionCase{DType::f64, 7, 334, true, false, Targets::duplicates}),
                         [](const ::testing::TestParamInfo<VersionCase>& info) { return case_name(info.param); });

// Vocabs v2 must refuse (no 16-byte packs, or a row larger than a block's shared memory): the predicate says so,
// calling v2 by name throws, and the public op (v1 there) still matches the CPU reference.
class SoftcapV2RefusesCuda : public ::testing::TestWithParam<VersionCase> {};

TEST_P(SoftcapV2RefusesCuda, PublicOpFallsBackToV1) {
  GPT_REQUIRE_CUDA_DEVICE();
  const VersionCase c = GetParam();
  const LossInputs in = make_inputs(c, 211);
  const DType gd = c.e5m2 ? DType::e5m2 : c.dtype;
  Tensor loss = Tensor::empty({1}, stat_dtype(c.dtype), Device::cuda);
  Tensor dz = Tensor::empty({c.rows, c.vocab}, gd, Device::cuda);
  const Tensor z = gpu(in.z), y = gpu(in.y), prefix = c.prefix ? gpu(in.prefix) : Tensor{};
  EXPECT_FALSE(cuda::softcap_train_v2_supports(z, dz));
  EXPECT_THROW(cuda::softcap_train_loss_v2(z, y, prefix, in.cfg, loss, dz), Error);
  expect_version_matches_cpu(softcap_train_loss, c);  // the public op
  expect_version_matches_cpu(cuda::softcap_train_loss_v1, c);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SoftcapV2RefusesCuda,
    ::testing::Values(VersionCase{DType::bf16, 7, 333, true, false, Targets::duplicates},  // 333 % 8 != 0
                      VersionCase{DType::bf16, 3, 131072, true, false, Targets::random},   // 256 KB per row
                      VersionCase{DType::bf16, 3, 131072, false, true, Targets::duplicates},
                      VersionCase{DType::f64, 2, 50304, true, false, Targets::random}),  // 402 KB per row
    [](const ::testing::TestParamInfo<VersionCase>& info) { return case_name(info.param); });

TEST(SoftcapVersionsCuda, V2SupportsTheRecipeShape16ByteAligned) {
  GPT_REQUIRE_CUDA_DEVICE();
  const Tensor z = Tensor::empty({4, 50304}, DType::bf16, Device::cuda);
  const Tensor dz = Tensor::empty({4, 50304}, DType::bf16, Device::cuda);
  const Tensor g8 = Tensor::empty({4, 50304}, DType::e5m2, Device::cuda);
  EXPECT_TRUE(cuda::softcap_train_v2_supports(z, dz));
  EXPECT_TRUE(cuda::softcap_train_v2_supports(z, g8));
  const Tensor flat = Tensor::empty({3 * 50304 + 4}, DType::bf16, Device::cuda);
  const Tensor shifted = flat.slice(4, 3 * 50304 + 4).view({3, 50304});  // starts 8 bytes past a 16-byte boundary
  EXPECT_FALSE(cuda::softcap_train_v2_supports(shifted, dz.slice(0, 3)));
}

// Same inputs, same bits: the row losses are summed in a fixed order and no element is written by two threads.
TEST(SoftcapVersionsCuda, V2IsDeterministic) {
  GPT_REQUIRE_CUDA_DEVICE();
  const VersionCase c{DType::bf16, 300, 50304, true, false, Targets::duplicates};
  const LossInputs in = make_inputs(c, 307);
  const Tensor z = gpu(in.z), y = gpu(in.y), prefix = gpu(in.prefix);
  Tensor loss_a = Tensor::empty({1}, DType::f32, Device::cuda), loss_b = Tensor::empty({1}, DType::f32, Device::cuda);
  Tensor dz_a = Tensor::empty({c.rows, c.vocab}, DType::bf16, Device::cuda);
  Tensor dz_b = Tensor::empty({c.rows, c.vocab}, DType::bf16, Device::cuda);
  cuda::softcap_train_loss_v2(z, y, prefix, in.cfg, loss_a, dz_a);
  cuda::softcap_train_loss_v2(z, y, prefix, in.cfg, loss_b, dz_b);
  const Tensor la = loss_a.to(Device::cpu), lb = loss_b.to(Device::cpu);
  const Tensor da = dz_a.to(Device::cpu), db = dz_b.to(Device::cpu);
  EXPECT_EQ(std::memcmp(la.raw(), lb.raw(), la.nbytes()), 0);
  EXPECT_EQ(std::memcmp(da.raw(), db.raw(), da.nbytes()), 0);
}

// One NaN logit makes the loss NaN in every version, as on the CPU: the run's non-finite-loss check depends on it
// (a clamp written with fminf/fmaxf once turned NaN logits into a finite loss while the weights were NaN).
TEST(SoftcapVersionsCuda, NanLogitMakesTheLossNan) {
  GPT_REQUIRE_CUDA_DEVICE();
  for (const bool e5m2 : {false, true}) {
    const VersionCase c{DType::bf16, 33, 50304, true, e5m2, Targets::random};
    LossInputs in = make_inputs(c, 409);
    in.z.data<bf16>()[17 * c.vocab + 1234] = bf16(std::numeric_limits<float>::quiet_NaN());
    const DType gd = e5m2 ? DType::e5m2 : c.dtype;
    Tensor loss_cpu = Tensor::empty({1}, DType::f32), dz_cpu = Tensor::empty({c.rows, c.vocab}, gd);
    softcap_train_loss(in.z, in.y, in.prefix, in.cfg, loss_cpu, dz_cpu);
    EXPECT_TRUE(std::isnan(loss_cpu.to_doubles()[0])) << "cpu, e5m2 " << e5m2;
    for (const TrainLossVersion& v : kTrainLossVersions) {
      Tensor loss = Tensor::empty({1}, DType::f32, Device::cuda),
             dz = Tensor::empty({c.rows, c.vocab}, gd, Device::cuda);
      v.fn(gpu(in.z), gpu(in.y), gpu(in.prefix), in.cfg, loss, dz);
      EXPECT_TRUE(std::isnan(loss.to_doubles()[0])) << v.name << ", e5m2 " << e5m2;
    }
  }
}

class ValidationLossCuda : public ::testing::TestWithParam<LossCase> {};

TEST_P(ValidationLossCuda, RowSumMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, vocab, unused] = GetParam();
  const Tensor z = random_tensor({rows, vocab}, dtype, 96, 12.0);
  const Tensor y = random_ids(rows, 0, vocab, 97, DType::i64);
  const DType sd = stat_dtype(dtype);
  Tensor sum_cpu = scalar_tensor(1.5, sd), sum_gpu = gpu(sum_cpu);  // rows_add accumulates
  validation_loss_rows_add(z, y, sum_cpu);
  validation_loss_rows_add(gpu(z), gpu(y), sum_gpu);
  EXPECT_LT(rel_error(sum_gpu, sum_cpu), dtype == DType::f64 ? 1e-12 : 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ValidationLossCuda,
                         ::testing::Values(LossCase{DType::f64, 5, 101, false}, LossCase{DType::f32, 5, 101, false},
                                           LossCase{DType::bf16, 5, 101, false},
                                           LossCase{DType::bf16, 512, 50304, false}));

}  // namespace
}  // namespace gpt
