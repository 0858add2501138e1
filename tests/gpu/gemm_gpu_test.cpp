// cuda::gemm and cuda::gemm_fp8 against the CPU reference on the same random inputs (tolerances: gpu_test_util.h).
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "kernels/cuda/runtime.h"
#include "kernels/gemm.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt {
namespace {

using gpu_testing::Pair;
using gpu_testing::poison;
using gpu_testing::random_pair;
using gpu_testing::relative_frobenius;

struct Case {
  DType in, out;
  int64_t m, n, k;
};

Shape a_shape(const Case& c, bool ta) { return ta ? Shape{c.k, c.m} : Shape{c.m, c.k}; }
Shape b_shape(const Case& c, bool tb) { return tb ? Shape{c.n, c.k} : Shape{c.k, c.n}; }

// Runs both backends on the same inputs and returns the relative Frobenius error of CUDA vs CPU.
double compare(const Pair& a, const Pair& b, const Shape& c_shape, DType out, const GemmArgs& args, uint64_t seed) {
  Pair c = random_pair(c_shape, out, seed);  // random C: beta ≠ 0 reads it, beta = 0 must ignore it
  if (args.beta == 0.0f) poison(c.cuda);
  gemm(a.cpu, b.cpu, c.cpu, args);
  gemm(a.cuda, b.cuda, c.cuda, args);
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  return relative_frobenius(c.cuda, c.cpu);
}

class GemmGpu : public ::testing::TestWithParam<std::tuple<bool, bool, int>> {};

const Case kCases[] = {
    {DType::bf16, DType::bf16, 192, 256, 320}, {DType::bf16, DType::f32, 192, 256, 320},
    {DType::f32, DType::f32, 96, 160, 72},     {DType::f64, DType::f64, 40, 56, 24},
    {DType::bf16, DType::bf16, 33, 17, 45},  // odd sizes: unaligned leading dimensions
};

TEST_P(GemmGpu, MatchesCpuReference) {
  GPT_REQUIRE_CUDA();
  const auto [ta, tb, index] = GetParam();
  const Case& c = kCases[index];
  const Pair a = random_pair(a_shape(c, ta), c.in, 11);
  const Pair b = random_pair(b_shape(c, tb), c.in, 12);
  const double err = compare(a, b, {c.m, c.n}, c.out, {.trans_a = ta, .trans_b = tb}, 13);
  EXPECT_LT(err, gpu_testing::tolerance_for(c.out)) << dtype_name(c.in) << " -> " << dtype_name(c.out);
}

INSTANTIATE_TEST_SUITE_P(AllLayoutsAndTypes, GemmGpu,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Range(0, 5)));

TEST(GemmGpuArgs, AlphaAndBetaAccumulateIntoC) {
  GPT_REQUIRE_CUDA();
  for (DType out : {DType::bf16, DType::f32}) {
    const Pair a = random_pair({64, 128}, DType::bf16, 21);
    const Pair b = random_pair({128, 96}, DType::bf16, 22);
    EXPECT_LT(compare(a, b, {64, 96}, out, {.alpha = 0.5f, .beta = -1.25f}, 23), gpu_testing::tolerance_for(out));
  }
}

TEST(GemmGpuArgs, BetaZeroIgnoresNanInC) {
  GPT_REQUIRE_CUDA();
  const Pair a = random_pair({32, 64}, DType::f32, 24);
  const Pair b = random_pair({64, 48}, DType::f32, 25);
  EXPECT_LT(compare(a, b, {32, 48}, DType::f32, {.alpha = 2.0f, .beta = 0.0f}, 26), gpu_testing::kTolF32);
}

TEST(GemmGpuBatched, EveryOperandBatched) {
  GPT_REQUIRE_CUDA();
  for (auto [ta, tb] :
       {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}, std::pair{true, true}}) {
    const Pair a = random_pair(ta ? Shape{3, 80, 64} : Shape{3, 64, 80}, DType::bf16, 31);
    const Pair b = random_pair(tb ? Shape{3, 48, 80} : Shape{3, 80, 48}, DType::bf16, 32);
    EXPECT_LT(compare(a, b, {3, 64, 48}, DType::bf16, {.trans_a = ta, .trans_b = tb}, 33), gpu_testing::kTolBf16);
  }
}

TEST(GemmGpuBatched, SharedSecondOperandHasStrideZero) {
  GPT_REQUIRE_CUDA();
  const Pair a = random_pair({4, 64, 96}, DType::bf16, 34);
  const Pair b = random_pair({40, 96}, DType::bf16, 35);  // one weight for every batch, as x·Wᵀ
  EXPECT_LT(compare(a, b, {4, 64, 40}, DType::f32, {.trans_b = true}, 36), gpu_testing::kTolF32);
}

TEST(GemmGpuBatched, SharedFirstOperandHasStrideZero) {
  GPT_REQUIRE_CUDA();
  const Pair a = random_pair({64, 32}, DType::bf16, 37);
  const Pair b = random_pair({5, 64, 24}, DType::bf16, 38);
  EXPECT_LT(compare(a, b, {5, 32, 24}, DType::bf16, {.trans_a = true}, 39), gpu_testing::kTolBf16);
}

TEST(GemmGpuBatched, F64BatchedWithBeta) {
  GPT_REQUIRE_CUDA();
  const Pair a = random_pair({2, 12, 20}, DType::f64, 40);
  const Pair b = random_pair({2, 20, 16}, DType::f64, 41);
  EXPECT_LT(compare(a, b, {2, 12, 16}, DType::f64, {.alpha = 1.5f, .beta = 0.25f}, 42), gpu_testing::kTolF64);
}

TEST(GemmGpuPlans, MisalignedSliceGetsItsOwnPlanAndStaysCorrect) {
  GPT_REQUIRE_CUDA();
  // Rows of 45 bf16 = 90 bytes: a slice starting at row 1 is only 2-byte aligned. The aligned call comes first so
  // that a plan cache keyed without alignment would reuse an algorithm that needs 16-byte operands.
  const Pair big = random_pair({65, 45}, DType::bf16, 43);
  const Pair b = random_pair({45, 40}, DType::bf16, 44);
  const Pair aligned{big.cpu.slice(0, 64), big.cuda.slice(0, 64)};
  const Pair shifted{big.cpu.slice(1, 65), big.cuda.slice(1, 65)};
  EXPECT_LT(compare(aligned, b, {64, 40}, DType::f32, {}, 45), gpu_testing::kTolF32);
  EXPECT_LT(compare(shifted, b, {64, 40}, DType::f32, {}, 46), gpu_testing::kTolF32);
}

TEST(GemmGpuPlans, RepeatedCallsAreBitwiseIdentical) {
  GPT_REQUIRE_CUDA();
  const Pair a = random_pair({128, 256}, DType::bf16, 47);
  const Pair b = random_pair({256, 128}, DType::bf16, 48);
  Tensor c1 = Tensor::empty({128, 128}, DType::f32, Device::cuda);
  Tensor c2 = Tensor::empty({128, 128}, DType::f32, Device::cuda);
  gemm(a.cuda, b.cuda, c1);
  gemm(a.cuda, b.cuda, c2);
  EXPECT_EQ(c1.to_doubles(), c2.to_doubles());
}

TEST(GemmGpuStreams, ConcurrentStreamsEachGetTheirOwnWorkspace) {
  GPT_REQUIRE_CUDA();
  const Pair a = random_pair({256, 512}, DType::bf16, 49);
  const Pair b = random_pair({512, 384}, DType::bf16, 50);
  Tensor ref = Tensor::empty({256, 384}, DType::f32);
  gemm(a.cpu, b.cpu, ref);
  cuda::Stream s1, s2;
  Tensor c1 = Tensor::empty({256, 384}, DType::f32, Device::cuda);
  Tensor c2 = Tensor::empty({256, 384}, DType::f32, Device::cuda);
  poison(c1);
  poison(c2);
  auto work = [&](cudaStream_t s, Tensor& c) {
    const cuda::StreamGuard guard(s);
    for (int i = 0; i < 8; ++i) gemm(a.cuda, b.cuda, c);
  };
  std::thread t1(work, s1.get(), std::ref(c1));
  std::thread t2(work, s2.get(), std::ref(c2));
  t1.join();
  t2.join();
  s1.synchronize();
  s2.synchronize();
  EXPECT_LT(relative_frobenius(c1, ref), gpu_testing::kTolF32);
  EXPECT_LT(relative_frobenius(c2, ref), gpu_testing::kTolF32);
}

// ---- FP8 ------------------------------------------------------------------------------------------------

// f32 output of an FP8 product. Hopper's FP8 tensor cores add into their accumulator with fewer mantissa bits than
// f32 (about 13–14 kept, so ≈2^-13 relative per addition), so the f32 check of bf16 products (1e-5, summation order
// only) does not apply. Measured on the H200 (2026-12-02): 2.1–2.4e-4 relative Frobenius error for K = 256 and
// K = 128 with the magnitudes of random_fp8 (products of [2^-4, 2^4) values, random signs); a model that adds
// groups of 16–32 exact products into an accumulator truncated to 13–14 bits gives 1.1–4.2e-4 for these inputs.
// 1e-3 leaves room for that (×4) while one wrong element, scale or layout is still far above it.
constexpr double kTolFp8F32 = 1e-3;

// Random fp8 bit patterns with magnitudes in [2^-4, 2^4) (no NaN/inf), as a CPU tensor.
Tensor random_fp8(const Shape& shape, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.raw());
  const bool e4m3 = dtype == DType::e4m3;
  const int bias = e4m3 ? 7 : 15, mant_bits = e4m3 ? 3 : 2;
  std::uniform_int_distribution<int> exp(bias - 4, bias + 3), mant(0, (1 << mant_bits) - 1), sign(0, 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    p[i] = static_cast<uint8_t>((sign(rng) << 7) | (exp(rng) << mant_bits) | mant(rng));
  }
  return t;
}

Tensor scale_tensor(float value, Device device) {
  const float v[1] = {value};
  return Tensor::from_floats(v, {1}, DType::f32, device);
}

struct Fp8Case {
  DType a, b, out;
  bool fast_accum;
  double tol;
};

class GemmFp8Gpu : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(GemmFp8Gpu, MatchesCpuReference) {
  GPT_REQUIRE_CUDA();
  const Fp8Case& p = GetParam();
  const int64_t m = 128, n = 192, k = 256;
  const Tensor a = random_fp8({m, k}, p.a, 61), b = random_fp8({n, k}, p.b, 62);
  const Tensor sa = scale_tensor(0.375f, Device::cpu), sb = scale_tensor(3.0f, Device::cpu);
  const Fp8GemmArgs args{.alpha = 0.5f, .beta = 0.0f, .fast_accum = p.fast_accum};
  Tensor ref = Tensor::empty({m, n}, p.out);
  gemm_fp8(a, b, ref, sa, sb, args);
  Tensor out = Tensor::empty({m, n}, p.out, Device::cuda);
  poison(out);
  gemm_fp8(a.to(Device::cuda), b.to(Device::cuda), out, sa.to(Device::cuda), sb.to(Device::cuda), args);
  EXPECT_LT(relative_frobenius(out, ref), p.tol);
}

INSTANTIATE_TEST_SUITE_P(Formats, GemmFp8Gpu,
                         ::testing::Values(Fp8Case{DType::e4m3, DType::e4m3, DType::bf16, false, gpu_testing::kTolBf16},
                                           Fp8Case{DType::e4m3, DType::e4m3, DType::f32, false, kTolFp8F32},
                                           Fp8Case{DType::e5m2, DType::e4m3, DType::bf16, false, gpu_testing::kTolBf16},
                                           Fp8Case{DType::e5m2, DType::e4m3, DType::f32, false, kTolFp8F32},
                                           Fp8Case{DType::e4m3, DType::e5m2, DType::f32, false, kTolFp8F32},
                                           // fast accumulation: reduced-precision partial sums, looser bound
                                           Fp8Case{DType::e4m3, DType::e4m3, DType::bf16, true, 1e-2}));

TEST(GemmFp8GpuArgs, BetaAccumulatesIntoC) {
  GPT_REQUIRE_CUDA();
  const Tensor a = random_fp8({64, 128}, DType::e4m3, 63), b = random_fp8({32, 128}, DType::e4m3, 64);
  const Tensor sa = scale_tensor(1.0f, Device::cpu), sb = scale_tensor(0.5f, Device::cpu);
  Pair c = random_pair({64, 32}, DType::f32, 65);
  const Fp8GemmArgs args{.alpha = 1.0f, .beta = 1.0f};
  gemm_fp8(a, b, c.cpu, sa, sb, args);
  gemm_fp8(a.to(Device::cuda), b.to(Device::cuda), c.cuda, sa.to(Device::cuda), sb.to(Device::cuda), args);
  EXPECT_LT(relative_frobenius(c.cuda, c.cpu), kTolFp8F32);  // measured 2.4e-4 (K = 128)
}

TEST(GemmFp8GpuArgs, RejectsScaleNotSixteenByteAligned) {
  GPT_REQUIRE_CUDA();
  const Tensor a = random_fp8({16, 32}, DType::e4m3, 66).to(Device::cuda);
  const Tensor b = random_fp8({16, 32}, DType::e4m3, 67).to(Device::cuda);
  const float four[4] = {1, 1, 1, 1};
  const Tensor scales = Tensor::from_floats(four, {4}, DType::f32, Device::cuda);
  Tensor c = Tensor::empty({16, 16}, DType::bf16, Device::cuda);
  EXPECT_THROW(gemm_fp8(a, b, c, scales.slice(1, 2), scales.slice(0, 1)), Error);
  EXPECT_NO_THROW(gemm_fp8(a, b, c, scales.slice(0, 1), scales.slice(0, 1)));
}

}  // namespace
}  // namespace gpt
