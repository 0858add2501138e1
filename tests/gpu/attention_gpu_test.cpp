// The production CUDA attention kernels (kernels/cuda/attention/kernels.h: promoted, candidate and the fallbacks of
// attention/fallback.h) and cuda::attention_forward / attention_backward against the f64 CPU reference
// (tests/gpu/attention_cases.h has the layouts and the tolerances). The kernel ladder has its own tests
// (tests/ladder/, label `ladder`).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cuda/attention/fallback.h"
#include "kernels/cuda/attention/kernels.h"
#include "tests/gpu/attention_cases.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt {
namespace {

using namespace attention_testing;

struct NamedForward {
  std::string name;
  cuda::AttentionForwardFn fn;
};
struct NamedBackward {
  std::string name;
  cuda::AttentionBackwardFn fn;
};

// Every forward / backward that production code can run: the kernels.h tables and the fallbacks they call.
std::vector<NamedForward> production_forwards() {
  std::vector<NamedForward> all;
  for (const auto& k : cuda::kAttentionForwardKernels) all.push_back({k.name, k.fn});
  all.push_back({"without_tma", cuda::attention_forward_without_tma});
  all.push_back({"any_scale", cuda::attention_forward_any_scale});
  return all;
}
std::vector<NamedBackward> production_backwards() {
  std::vector<NamedBackward> all;
  for (const auto& k : cuda::kAttentionBackwardKernels) all.push_back({k.name, k.fn});
  all.push_back({"without_tma", cuda::attention_backward_without_tma});
  return all;
}

TEST(AttentionGpuKernels, PromotedComeFirstUnderTheirNames) {
  EXPECT_STREQ(cuda::kAttentionForwardKernels[0].name, cuda::kPromotedForward.name);
  EXPECT_STREQ(cuda::kAttentionBackwardKernels[0].name, cuda::kPromotedBackward.name);
  EXPECT_STREQ(cuda::kPromotedForward.name, "warp_specialized");
  EXPECT_STREQ(cuda::kCandidateForward.name, "persistent");
  EXPECT_STREQ(cuda::kPromotedBackward.name, "async_epilogue");
  EXPECT_STREQ(cuda::kCandidateBackward.name, "deferred_dq");
}

class AttentionGpu : public ::testing::TestWithParam<Layout> {};

TEST_P(AttentionGpu, ForwardAndBackwardMatchF64Reference) {
  GPT_REQUIRE_CUDA();
  const Case c = make_case(GetParam());
  for (const auto& kernel : production_forwards()) {
    SCOPED_TRACE("forward " + kernel.name);
    expect_forward_matches(c, kernel.fn);
  }
  {
    SCOPED_TRACE("cuda::attention_forward");
    expect_forward_matches(c, cuda::attention_forward);
  }
  const GpuForward f = run_forward(c, cuda::attention_forward);
  for (const auto& kernel : production_backwards()) {
    SCOPED_TRACE("backward " + kernel.name);
    expect_backward_matches(c, f, kernel.fn);
  }
  SCOPED_TRACE("cuda::attention_backward");
  expect_backward_matches(c, f, cuda::attention_backward);
}

TEST(AttentionGpuWindowZero, EachQueryCopiesItsValueAndLogitGradientsVanish) {
  GPT_REQUIRE_CUDA();
  for (const Layout& p : window_zero_layouts()) {
    const Case c = make_case(p);
    for (const auto& kernel : production_forwards()) {
      SCOPED_TRACE(p.name + " forward " + kernel.name);
      expect_forward_copies_values(c, kernel.fn);
    }
    const GpuForward f = run_forward(c, cuda::attention_forward);
    for (const auto& kernel : production_backwards()) {
      SCOPED_TRACE(p.name + " backward " + kernel.name);
      expect_logit_gradients_vanish(c, f, kernel.fn);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, AttentionGpu, ::testing::ValuesIn(layouts()),
                         [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

// Every production forward within the bf16 tolerance of the promoted one; the persistent candidate computes each
// (query block, head) item exactly as the promoted block does (same rows per block, same key tiles in the same
// order), so it must give the promoted kernel's bits on every run.
TEST(AttentionGpuRecipeSlice, ForwardKernelsAgreeAndThePersistentOneEqualsThePromoted) {
  GPT_REQUIRE_CUDA();
  const Case c = recipe_slice_case();
  const GpuForward promoted = run_forward(c, cuda::kPromotedForward.fn);
  for (const auto& kernel : production_forwards()) {
    SCOPED_TRACE("forward " + kernel.name);
    const GpuForward f = run_forward(c, kernel.fn);
    EXPECT_LT(relative_frobenius(f.y, promoted.y), kTolY) << "y vs promoted";
    EXPECT_LT(relative_frobenius(f.lse, promoted.lse), kTolLse) << "lse vs promoted";
  }
  SCOPED_TRACE("persistent against warp_specialized");
  expect_forward_bits_equal(c, cuda::attention_forward_persistent, cuda::attention_forward_warp_specialized);
}

// Every production backward repeats bitwise and agrees with the two-pass fallback; deferred_dq only delays each
// tile's dQ product (same sums in the same order): the promoted kernel's bits.
TEST(AttentionGpuRecipeSlice, BackwardKernelsRepeatBitwiseAndAgree) {
  GPT_REQUIRE_CUDA();
  const Case c = recipe_slice_case();
  const GpuForward f = run_forward(c, cuda::attention_forward);
  const GpuGrads baseline = run_backward(c, f, cuda::attention_backward_without_tma);
  for (const auto& kernel : production_backwards()) {
    SCOPED_TRACE("backward " + kernel.name);
    expect_backward_repeats_and_agrees(c, f, kernel.fn, baseline);
  }
  SCOPED_TRACE("deferred_dq against async_epilogue");
  expect_grads_bits_equal(run_backward(c, f, cuda::attention_backward_deferred_dq),
                          run_backward(c, f, cuda::attention_backward_async_epilogue));
}

TEST(AttentionGpuRecipeSlice, OverwrittenGradientsEqualAddingIntoZeros) {
  GPT_REQUIRE_CUDA();
  const Case c = recipe_slice_case();
  const GpuForward f = run_forward(c, cuda::attention_forward);
  for (const auto& kernel : production_backwards()) {
    SCOPED_TRACE("backward " + kernel.name);
    expect_overwrite_equals_adding_into_zeros(c, f, kernel.fn);
  }
}

TEST(AttentionGpuCuSeqlens, DoubleMatchesCpu) {
  GPT_REQUIRE_CUDA();
  const std::vector<int32_t> cu = {0, 5, 5, 100, 4096, 4096};
  Tensor out_cpu = Tensor::empty({6}, DType::i32);
  double_cu_seqlens(cu_tensor(cu, Device::cpu), out_cpu);
  Tensor out_gpu = Tensor::empty({6}, DType::i32, Device::cuda);
  double_cu_seqlens(cu_tensor(cu, Device::cuda), out_gpu);
  EXPECT_EQ(out_gpu.to_doubles(), out_cpu.to_doubles());
}

TEST(AttentionGpuArgs, RejectsOtherDtypesAndHeadDims) {
  GPT_REQUIRE_CUDA();
  const Tensor cu = cu_tensor({0, 8}, Device::cuda);
  for (auto [dtype, dim] : {std::pair{DType::f32, int64_t{128}}, std::pair{DType::bf16, int64_t{64}}}) {
    const Tensor x = Tensor::zeros({8, 1, dim}, dtype, Device::cuda);
    Tensor y = Tensor::empty({8, 1, dim}, dtype, Device::cuda);
    Tensor lse = Tensor::empty({1, 8}, stat_dtype(dtype), Device::cuda);
    EXPECT_THROW(attention_forward(x, x, x, cu, y, lse, 4, 0.1f), Error);
  }
}

}  // namespace
}  // namespace gpt
