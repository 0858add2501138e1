// CUDA per-head output gate (kernels/head_gate.h) and gated XSA (kernels/xsa.h) against the CPU references.
// Both read their lanes in place from a [T, G] gate tensor; the backwards add into the same lanes only.
#include <gtest/gtest.h>

#include "kernels/head_gate.h"
#include "kernels/xsa.h"
#include "tests/gpu/attention_ops_test_util.h"

namespace gpt {
namespace {

using namespace gpu_testing;

constexpr int64_t kLanes = 23;  // G: more lanes than heads, the op's block starts inside
constexpr int64_t kFirstLane = 5;

class HeadGateCuda : public ::testing::TestWithParam<DType> {};

TEST_P(HeadGateCuda, ForwardAndBackwardMatchCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const TokenShape& s : {kSmallShape, kRecipeShape}) {
    const Pair y = random_pair(s.shape(), dtype, 1);
    const Pair gates = random_pair({s.tokens, kLanes}, dtype, 2);
    Tensor out_cpu = Tensor::empty(s.shape(), dtype);
    Tensor out_gpu = Tensor::empty(s.shape(), dtype, Device::cuda);
    poison(out_gpu);
    head_gate_forward(y.cpu, gates.cpu, kFirstLane, out_cpu);
    head_gate_forward(y.cuda, gates.cuda, kFirstLane, out_gpu);
    EXPECT_LT(relative_frobenius(out_gpu, out_cpu), tolerance_for(dtype)) << shape_string(s.shape());

    const Pair dy_out = random_pair(s.shape(), dtype, 3);
    const Tensor dy0 = testing::random_tensor(s.shape(), dtype, 4);
    const Tensor dg0 = testing::random_tensor({s.tokens, kLanes}, dtype, 5);
    Tensor dy_cpu = dy0.clone(), dg_cpu = dg0.clone();
    Tensor dy_gpu = dy0.to(Device::cuda), dg_gpu = dg0.to(Device::cuda);
    head_gate_backward(dy_out.cpu, y.cpu, gates.cpu, kFirstLane, dy_cpu, dg_cpu);
    head_gate_backward(dy_out.cuda, y.cuda, gates.cuda, kFirstLane, dy_gpu, dg_gpu);
    EXPECT_LT(added_error(dy_gpu, dy_cpu, dy0), backward_tolerance(dtype)) << "dy";
    EXPECT_LT(added_error(dg_gpu, dg_cpu, dg0), backward_tolerance(dtype)) << "dgates";
    Tensor written_cpu = Tensor::empty(s.shape(), dtype), written_gpu = Tensor::empty(s.shape(), dtype, Device::cuda);
    poison(written_gpu);
    Tensor wg_cpu = dg0.clone(), wg_gpu = dg0.to(Device::cuda);
    head_gate_backward(dy_out.cpu, y.cpu, gates.cpu, kFirstLane, written_cpu, wg_cpu, GradWrite::overwrite);
    head_gate_backward(dy_out.cuda, y.cuda, gates.cuda, kFirstLane, written_gpu, wg_gpu, GradWrite::overwrite);
    EXPECT_LT(relative_frobenius(written_gpu, written_cpu), backward_tolerance(dtype)) << "written dy";
    // Lanes outside [first, first + H) are untouched.
    EXPECT_EQ(minus(dg_gpu, dg_cpu).size(), static_cast<size_t>(s.tokens * kLanes));
    const std::vector<double> after = dg_gpu.to_doubles(), before = dg0.to_doubles();
    for (int64_t t = 0; t < s.tokens; t += 97) {
      EXPECT_EQ(after[t * kLanes + kFirstLane - 1], before[t * kLanes + kFirstLane - 1]);
      EXPECT_EQ(after[t * kLanes + kFirstLane + s.heads], before[t * kLanes + kFirstLane + s.heads]);
    }
  }
}

class XsaCuda : public ::testing::TestWithParam<DType> {};

TEST_P(XsaCuda, ForwardAndBackwardMatchCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const TokenShape& s : {kSmallShape, kRecipeShape}) {
    const Pair y = random_pair(s.shape(), dtype, 11);
    const Pair v = random_pair(s.shape(), dtype, 12);
    const Pair gates = random_pair({s.tokens, kLanes}, dtype, 13);
    Tensor out_cpu = Tensor::empty(s.shape(), dtype);
    Tensor out_gpu = Tensor::empty(s.shape(), dtype, Device::cuda);
    poison(out_gpu);
    xsa_forward(y.cpu, v.cpu, gates.cpu, kFirstLane, out_cpu);
    xsa_forward(y.cuda, v.cuda, gates.cuda, kFirstLane, out_gpu);
    EXPECT_LT(relative_frobenius(out_gpu, out_cpu), tolerance_for(dtype)) << shape_string(s.shape());
    Tensor inplace = y.cuda.clone();
    xsa_forward(inplace, v.cuda, gates.cuda, kFirstLane, inplace);
    EXPECT_LT(relative_frobenius(inplace, out_cpu), tolerance_for(dtype)) << "in place";

    const Pair dy_out = random_pair(s.shape(), dtype, 14);
    const Tensor dy0 = testing::random_tensor(s.shape(), dtype, 15);
    const Tensor dv0 = testing::random_tensor(s.shape(), dtype, 16);
    const Tensor dg0 = testing::random_tensor({s.tokens, kLanes}, dtype, 17);
    Tensor dy_cpu = dy0.clone(), dv_cpu = dv0.clone(), dg_cpu = dg0.clone();
    Tensor dy_gpu = dy0.to(Device::cuda), dv_gpu = dv0.to(Device::cuda), dg_gpu = dg0.to(Device::cuda);
    xsa_backward(dy_out.cpu, y.cpu, v.cpu, gates.cpu, kFirstLane, dy_cpu, dv_cpu, dg_cpu);
    xsa_backward(dy_out.cuda, y.cuda, v.cuda, gates.cuda, kFirstLane, dy_gpu, dv_gpu, dg_gpu);
    EXPECT_LT(added_error(dy_gpu, dy_cpu, dy0), backward_tolerance(dtype)) << "dy";
    EXPECT_LT(added_error(dv_gpu, dv_cpu, dv0), backward_tolerance(dtype)) << "dv";
    EXPECT_LT(added_error(dg_gpu, dg_cpu, dg0), backward_tolerance(dtype)) << "dgates";

    // dy and dv written by their first writer over poison: what the CPU reference writes.
    Tensor wy_cpu = Tensor::empty(s.shape(), dtype), wv_cpu = Tensor::empty(s.shape(), dtype);
    Tensor wy_gpu = Tensor::empty(s.shape(), dtype, Device::cuda);
    Tensor wv_gpu = Tensor::empty(s.shape(), dtype, Device::cuda);
    poison(wy_gpu);
    poison(wv_gpu);
    Tensor wg_cpu = dg0.clone(), wg_gpu = dg0.to(Device::cuda);
    xsa_backward(dy_out.cpu, y.cpu, v.cpu, gates.cpu, kFirstLane, wy_cpu, wv_cpu, wg_cpu, GradWrite::overwrite,
                 GradWrite::overwrite);
    xsa_backward(dy_out.cuda, y.cuda, v.cuda, gates.cuda, kFirstLane, wy_gpu, wv_gpu, wg_gpu, GradWrite::overwrite,
                 GradWrite::overwrite);
    EXPECT_LT(relative_frobenius(wy_gpu, wy_cpu), backward_tolerance(dtype)) << "written dy";
    EXPECT_LT(relative_frobenius(wv_gpu, wv_cpu), backward_tolerance(dtype)) << "written dv";
  }
}

TEST(XsaCudaChecks, ZeroValueRowsTakeTheClampedBranch) {
  GPT_REQUIRE_CUDA();
  const TokenShape s{8, 2, 32};
  const Pair y = random_pair(s.shape(), DType::f64, 21);
  const Tensor v_cpu = Tensor::zeros(s.shape(), DType::f64);
  const Pair gates = random_pair({s.tokens, 4}, DType::f64, 22);
  const Pair dy_out = random_pair(s.shape(), DType::f64, 23);
  Tensor dy_cpu = Tensor::zeros(s.shape(), DType::f64), dv_cpu = dy_cpu.clone(),
         dg_cpu = Tensor::zeros({8, 4}, DType::f64);
  Tensor dy_gpu = dy_cpu.to(Device::cuda), dv_gpu = dy_gpu.clone(), dg_gpu = dg_cpu.to(Device::cuda);
  xsa_backward(dy_out.cpu, y.cpu, v_cpu, gates.cpu, 1, dy_cpu, dv_cpu, dg_cpu);
  xsa_backward(dy_out.cuda, y.cuda, v_cpu.to(Device::cuda), gates.cuda, 1, dy_gpu, dv_gpu, dg_gpu);
  EXPECT_LT(relative_frobenius(dy_gpu, dy_cpu), kTolF64);
  EXPECT_LT(relative_frobenius(dv_gpu, dv_cpu), kTolF64);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HeadGateCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         dtype_param_name);
INSTANTIATE_TEST_SUITE_P(Dtypes, XsaCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16), dtype_param_name);

}  // namespace
}  // namespace gpt
