// CUDA DC correction (kernels/dc_attention.h) against the CPU reference: segments that cut windows short,
// small windows and the recipe's 112-key window at T = 16384, H = 6, D = 128; forward (y_out, lse) and
// backward (dq, dk, dv, both gate-lane blocks).
#include <gtest/gtest.h>

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

Tensor cu_tensor(const std::vector<int32_t>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

void check_case(const DcCase& c, DType dtype) {
  const TokenShape& s = c.shape;
  const float scale = 0.12f;
  const Pair q = random_pair(s.shape(), dtype, 1), k = random_pair(s.shape(), dtype, 2),
             v = random_pair(s.shape(), dtype, 3), y_core = random_pair(s.shape(), dtype, 4);
  const Pair gates = random_pair({s.tokens, kLanes}, dtype, 5);
  const Tensor cu_cpu = cu_tensor(c.cu_seqlens), cu_gpu = cu_cpu.to(Device::cuda);
  const DType sd = stat_dtype(dtype);
  Tensor y_cpu = Tensor::empty(s.shape(), dtype), lse_cpu = Tensor::empty({s.heads, s.tokens}, sd);
  Tensor y_gpu = Tensor::empty(s.shape(), dtype, Device::cuda), lse_gpu = Tensor::empty({s.heads, s.tokens}, sd, Device::cuda);
  poison(y_gpu);
  poison(lse_gpu);
  dc_attention_forward(q.cpu, k.cpu, v.cpu, cu_cpu, gates.cpu, kDcLanes, y_core.cpu, y_cpu, lse_cpu, scale, c.keys);
  dc_attention_forward(q.cuda, k.cuda, v.cuda, cu_gpu, gates.cuda, kDcLanes, y_core.cuda, y_gpu, lse_gpu, scale,
                       c.keys);
  const std::string where = shape_string(s.shape()) + " keys " + std::to_string(c.keys);
  // The correction itself (y_out − y_core), so y_core cannot hide it.
  EXPECT_LT(added_error(y_gpu, y_cpu, y_core.cpu), backward_tolerance(dtype)) << "y_out " << where;
  EXPECT_LT(relative_frobenius(lse_gpu, lse_cpu), tolerance_for(sd)) << "lse " << where;

  const Pair dy_out = random_pair(s.shape(), dtype, 6);
  const Tensor dq0 = testing::random_tensor(s.shape(), dtype, 7, 0.01), dk0 = testing::random_tensor(s.shape(), dtype, 8, 0.01),
               dv0 = testing::random_tensor(s.shape(), dtype, 9, 0.01),
               dg0 = testing::random_tensor({s.tokens, kLanes}, dtype, 10, 0.01);
  Tensor dq_c = dq0.clone(), dk_c = dk0.clone(), dv_c = dv0.clone(), dg_c = dg0.clone();
  Tensor dq_g = dq0.to(Device::cuda), dk_g = dk0.to(Device::cuda), dv_g = dv0.to(Device::cuda),
         dg_g = dg0.to(Device::cuda);
  dc_attention_backward(dy_out.cpu, q.cpu, k.cpu, v.cpu, cu_cpu, gates.cpu, kDcLanes, lse_cpu, dq_c, dk_c, dv_c, dg_c,
                        scale, c.keys);
  dc_attention_backward(dy_out.cuda, q.cuda, k.cuda, v.cuda, cu_gpu, gates.cuda, kDcLanes, lse_gpu, dq_g, dk_g, dv_g,
                        dg_g, scale, c.keys);
  const double tol = backward_tolerance(dtype);
  EXPECT_LT(added_error(dq_g, dq_c, dq0), tol) << "dq " << where;
  EXPECT_LT(added_error(dk_g, dk_c, dk0), tol) << "dk " << where;
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

INSTANTIATE_TEST_SUITE_P(Dtypes, DcAttentionCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         dtype_param_name);

}  // namespace
}  // namespace gpt
