// CUDA DC correction (kernels/dc_attention.h) against the CPU reference: segments that cut windows short,
// small windows and the recipe's 112-key window at T = 16384, H = 6, D = 128; forward (y_out, lse) and
// backward (dq, dk, dv, both gate-lane blocks). Every version of kernels/cuda/dc_attention_variants.h is checked:
// the public entry points (v2 where it applies, else v1) for every dtype, and v1 and v2 by name on bf16.
#include <gtest/gtest.h>

#include "kernels/cuda/dc_attention_variants.h"
#include "kernels/dc_attention.h"
#include "tests/gpu/attention_ops_test_util.h"

namespace gpt {
namespace {

using namespace gpu_testing;

constexpr int64_t kLanes = 16;
constexpr DcLanes kDcLanes{.w1 = 1, .w2 = 9};

struct DcCase {
  TokenShape shape;
  std::vector<int32_t> cu_seqlens;
  int64_t keys;
};

using DcForwardFn = void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, DcLanes,
                             const Tensor&, Tensor&, Tensor&, float, int64_t);
using DcBackwardFn = void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              DcLanes, const Tensor&, Tensor&, Tensor&, Tensor&, Tensor&, float, int64_t);
struct DcVersion {
  const char* name;
  DcForwardFn forward;
  DcBackwardFn backward;
};
constexpr DcVersion kPublic{"public", dc_attention_forward, dc_attention_backward};
constexpr DcVersion kV1{"v1", cuda::dc_attention_forward_v1, cuda::dc_attention_backward_v1};
constexpr DcVersion kV2{"v2", cuda::dc_attention_forward_v2, cuda::dc_attention_backward_v2};

Tensor cu_tensor(const std::vector<int32_t>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

void check_case(const DcCase& c, DType dtype, const DcVersion& version = kPublic) {
  const TokenShape& s = c.shape;
  const float scale = 0.12f;
  const Pair q = random_pair(s.shape(), dtype, 1), k = random_pair(s.shape(), dtype, 2),
             v = random_pair(s.shape(), dtype, 3), y_core = random_pair(s.shape(), dtype, 4);
  const Pair gates = random_pair({s.tokens, kLanes}, dtype, 5);
  const Tensor cu_cpu = cu_tensor(c.cu_seqlens), cu_gpu = cu_cpu.to(Device::cuda);
  const DType sd = stat_dtype(dtype);
  Tensor y_cpu = Tensor::empty(s.shape(), dtype), lse_cpu = Tensor::empty({s.heads, s.tokens}, sd);
  Tensor y_gpu = Tensor::empty(s.shape(), dtype, Device::cuda),
         lse_gpu = Tensor::empty({s.heads, s.tokens}, sd, Device::cuda);
  poison(y_gpu);
  poison(lse_gpu);
  dc_attention_forward(q.cpu, k.cpu, v.cpu, cu_cpu, gates.cpu, kDcLanes, y_core.cpu, y_cpu, lse_cpu, scale, c.keys);
  version.forward(q.cuda, k.cuda, v.cuda, cu_gpu, gates.cuda, kDcLanes, y_core.cuda, y_gpu, lse_gpu, scale, c.keys);
  const std::string where =
      std::string(version.name) + " " + shape_string(s.shape()) + " keys " + std::to_string(c.keys);
  // The correction itself (y_out − y_core), so y_core cannot hide it.
  EXPECT_LT(added_error(y_gpu, y_cpu, y_core.cpu), backward_tolerance(dtype)) << "y_out " << where;
  EXPECT_LT(relative_frobenius(lse_gpu, lse_cpu), tolerance_for(sd)) << "lse " << where;

  const Pair dy_out = random_pair(s.shape(), dtype, 6);
  const Tensor dq0 = testing::random_tensor(s.shape(), dtype, 7, 0.01),
               dk0 = testing::random_tensor(s.shape(), dtype, 8, 0.01),
               dv0 = testing::random_tensor(s.shape(), dtype, 9, 0.01),
               dg0 = testing::random_tensor({s.tokens, kLanes}, dtype, 10, 0.01);
  Tensor dq_c = dq0.clone(), dk_c = dk0.clone(), dv_c = dv0.clone(), dg_c = dg0.clone();
  Tensor dq_g = dq0.to(Device::cuda), dk_g = dk0.to(Device::cuda), dv_g = dv0.to(Device::cuda),
         dg_g = dg0.to(Device::cuda);
  dc_attention_backward(dy_out.cpu, q.cpu, k.cpu, v.cpu, cu_cpu, gates.cpu, kDcLanes, lse_cpu, dq_c, dk_c, dv_c, dg_c,
                        scale, c.keys);
  version.backward(dy_out.cuda, q.cuda, k.cuda, v.cuda, cu_gpu, gates.cuda, kDcLanes, lse_gpu, dq_g, dk_g, dv_g, dg_g,
                   scale, c.keys);
  const double tol = backward_tolerance(dtype);
  if (c.keys == 1) {
    // One key: π = 1, dw1 = da, so dlogit and the exact dq, dk increments are 0 (a relative error would divide
    // rounding residue by zero); the start values must come back within bf16 rounding.
    EXPECT_LT(relative_frobenius(dq_g, dq0), tol) << "dq " << where;
    EXPECT_LT(relative_frobenius(dk_g, dk0), tol) << "dk " << where;
  } else {
    EXPECT_LT(added_error(dq_g, dq_c, dq0), tol) << "dq " << where;
    EXPECT_LT(added_error(dk_g, dk_c, dk0), tol) << "dk " << where;
  }
  EXPECT_LT(added_error(dv_g, dv_c, dv0), tol) << "dv " << where;
  EXPECT_LT(added_error(dg_g, dg_c, dg0), tol) << "dgates " << where;
}

class DcAttentionCuda : public ::testing::TestWithParam<DType> {};

TEST_P(DcAttentionCuda, SmallShapesMatchCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  check_case({kSmallShape, {0, 10, 10, 25, 37}, 8}, dtype);
  check_case({kSmallShape, {0, 37}, 112}, dtype);  // window longer than the sequence
  check_case({TokenShape{50, 3, 32}, {0, 1, 2, 30, 50, 50}, 5}, dtype);
}

TEST_P(DcAttentionCuda, RecipeShapeMatchesCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  if (dtype == DType::f64) GTEST_SKIP() << "f64 is covered by the small shapes (CPU reference time)";
  check_case({kRecipeShape, {0, 3000, 3001, 9000, 16384, 16384}, kDcKeys}, dtype);
}

// v2's geometry: 64-token blocks, 16-row warps with a 128-wide span, masks per element. Token counts off the
// block size, one-token segments, segments longer and shorter than the window, windows 1, 40, 112 and 113 (the
// largest v2 takes), and 1, 6 and 7 heads.
TEST(DcAttentionCudaVersions, V2MatchesCpuOnEdgeLayouts) {
  GPT_REQUIRE_CUDA();
  const std::vector<int32_t> mixed{0, 1, 2, 70, 71, 200, 333, 333, 600, 1000};
  for (int64_t keys : {int64_t{112}, int64_t{113}, int64_t{40}, int64_t{1}}) {
    check_case({TokenShape{1000, 6, 128}, mixed, keys}, DType::bf16, kV2);
  }
  check_case({TokenShape{65, 1, 128}, {0, 65}, 112}, DType::bf16, kV2);
  check_case({TokenShape{300, 7, 128}, {0, 17, 300}, 112}, DType::bf16, kV2);  // 7: the most the 16 lanes hold
  check_case({TokenShape{129, 6, 128}, {0, 64, 128, 129}, 112}, DType::bf16, kV2);
}

TEST(DcAttentionCudaVersions, BothVersionsMatchCpuAtRecipeShape) {
  GPT_REQUIRE_CUDA();
  for (const DcVersion& version : {kV1, kV2}) {
    check_case({kRecipeShape, {0, 3000, 3001, 9000, 16384, 16384}, kDcKeys}, DType::bf16, version);
  }
}

TEST(DcAttentionCudaVersions, V2DeclinesWhatItCannotRun) {
  const Tensor q128 = Tensor::empty({8, 6, 128}, DType::bf16), q64 = Tensor::empty({8, 6, 64}, DType::bf16);
  const Tensor q9 = Tensor::empty({8, 9, 128}, DType::bf16), qf = Tensor::empty({8, 6, 128}, DType::f32);
  const Tensor gates = Tensor::empty({8, 16}, DType::bf16), gates_f = Tensor::empty({8, 16}, DType::f32);
  EXPECT_TRUE(cuda::dc_attention_v2_supports(q128, gates, kDcKeys));
  EXPECT_TRUE(cuda::dc_attention_v2_supports(q128, gates, cuda::kDcMaxKeysV2));
  EXPECT_FALSE(cuda::dc_attention_v2_supports(q128, gates, cuda::kDcMaxKeysV2 + 1));
  EXPECT_FALSE(cuda::dc_attention_v2_supports(q64, gates, kDcKeys));
  EXPECT_FALSE(cuda::dc_attention_v2_supports(q9, gates, kDcKeys));
  EXPECT_FALSE(cuda::dc_attention_v2_supports(qf, gates_f, kDcKeys));
  EXPECT_FALSE(cuda::dc_attention_v2_supports(q128, gates_f, kDcKeys));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DcAttentionCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         dtype_param_name);

}  // namespace
}  // namespace gpt
