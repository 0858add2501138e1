// The attention kernel ladder (kernels/cuda/ladder/attention_versions.h): every version, production or superseded,
// against the f64 CPU reference on the layouts of tests/gpu/attention_cases.h, and the bitwise equalities between
// versions that only reorder work. Label `gpu;ladder` (tests/CMakeLists.txt): run with `ctest -L ladder`.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "kernels/attention.h"
#include "kernels/cuda/ladder/attention_versions.h"
#include "tests/gpu/attention_cases.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt {
namespace {

using namespace attention_testing;
using cuda::ladder::backward_version;
using cuda::ladder::forward_version;
using cuda::ladder::kAttentionBackwardVersions;
using cuda::ladder::kAttentionForwardVersions;

TEST(AttentionLadder, VersionsAreFoundByNameAndUnknownNamesAreErrors) {
  EXPECT_EQ(forward_version("v12").fn, cuda::kPromotedForward.fn);
  EXPECT_EQ(forward_version("v13").fn, cuda::kCandidateForward.fn);
  EXPECT_EQ(backward_version("v5").fn, cuda::kPromotedBackward.fn);
  EXPECT_EQ(backward_version("v7").fn, cuda::kCandidateBackward.fn);
  EXPECT_THROW(forward_version("v14"), Error);
  EXPECT_THROW(backward_version("persistent"), Error);
}

class AttentionLadder : public ::testing::TestWithParam<Layout> {};

TEST_P(AttentionLadder, EveryVersionMatchesF64Reference) {
  GPT_REQUIRE_CUDA();
  const Case c = make_case(GetParam());
  for (const auto& version : kAttentionForwardVersions) {
    SCOPED_TRACE(std::string("forward ") + version.name);
    expect_forward_matches(c, version.fn);
  }
  const GpuForward f = run_forward(c, cuda::attention_forward);
  for (const auto& version : kAttentionBackwardVersions) {
    SCOPED_TRACE(std::string("backward ") + version.name);
    expect_backward_matches(c, f, version.fn);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, AttentionLadder, ::testing::ValuesIn(layouts()),
                         [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

TEST(AttentionLadderWindowZero, EachQueryCopiesItsValueAndLogitGradientsVanish) {
  GPT_REQUIRE_CUDA();
  for (const Layout& p : window_zero_layouts()) {
    const Case c = make_case(p);
    for (const auto& version : kAttentionForwardVersions) {
      SCOPED_TRACE(p.name + " forward " + version.name);
      expect_forward_copies_values(c, version.fn);
    }
    const GpuForward f = run_forward(c, cuda::attention_forward);
    for (const auto& version : kAttentionBackwardVersions) {
      SCOPED_TRACE(p.name + " backward " + version.name);
      expect_logit_gradients_vanish(c, f, version.fn);
    }
  }
}

// Every forward version within the bf16 tolerance of v8; each persistent version gives its one-block-per-item
// twin's bits.
TEST(AttentionLadderRecipeSlice, ForwardVersionsAgreeAndPersistentOnesEqualTheirTwins) {
  GPT_REQUIRE_CUDA();
  const Case c = recipe_slice_case();
  const GpuForward v8 = run_forward(c, forward_version("v8").fn);
  for (const auto& version : kAttentionForwardVersions) {
    SCOPED_TRACE(std::string("forward ") + version.name);
    const GpuForward f = run_forward(c, version.fn);
    EXPECT_LT(relative_frobenius(f.y, v8.y), kTolY) << "y vs v8";
    EXPECT_LT(relative_frobenius(f.lse, v8.lse), kTolLse) << "lse vs v8";
  }
  for (const auto& [persistent, twin] : {std::pair{"v9", "v8"}, std::pair{"v11", "v10"}, std::pair{"v13", "v12"}}) {
    SCOPED_TRACE(std::string(persistent) + " against " + twin);
    expect_forward_bits_equal(c, forward_version(persistent).fn, forward_version(twin).fn);
  }
}

// Every backward version repeats bitwise and agrees with v3; v6 only reorders v5's products and v7 only delays each
// tile's dQ product (same sums in the same order): v5's bits.
TEST(AttentionLadderRecipeSlice, BackwardVersionsRepeatBitwiseAndAgree) {
  GPT_REQUIRE_CUDA();
  const Case c = recipe_slice_case();
  const GpuForward f = run_forward(c, cuda::attention_forward);
  const GpuGrads v3 = run_backward(c, f, backward_version("v3").fn);
  for (const auto& version : kAttentionBackwardVersions) {
    SCOPED_TRACE(std::string("backward ") + version.name);
    expect_backward_repeats_and_agrees(c, f, version.fn, v3);
  }
  const GpuGrads v5 = run_backward(c, f, backward_version("v5").fn);
  for (const char* name : {"v6", "v7"}) {
    SCOPED_TRACE(std::string("backward ") + name + " against v5");
    expect_grads_bits_equal(run_backward(c, f, backward_version(name).fn), v5);
  }
}

TEST(AttentionLadderRecipeSlice, OverwrittenGradientsEqualAddingIntoZeros) {
  GPT_REQUIRE_CUDA();
  const Case c = recipe_slice_case();
  const GpuForward f = run_forward(c, cuda::attention_forward);
  for (const auto& version : kAttentionBackwardVersions) {
    SCOPED_TRACE(std::string("backward ") + version.name);
    expect_overwrite_equals_adding_into_zeros(c, f, version.fn);
  }
}

}  // namespace
}  // namespace gpt
