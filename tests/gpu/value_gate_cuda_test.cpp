// CUDA gated value-embedding injection (kernels/value_gate.h) against the CPU reference, including the
// gate-input lanes of ve (their gradient collects the gate term and the direct term) and the dgate reduction
// over all tokens.
#include <gtest/gtest.h>

#include "kernels/value_gate.h"
#include "tests/gpu/attention_ops_test_util.h"

namespace gpt {
namespace {

using namespace gpu_testing;

class ValueGateCuda : public ::testing::TestWithParam<DType> {};

TEST_P(ValueGateCuda, ForwardAndBackwardMatchCpu) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const TokenShape& s : {kSmallShape, kRecipeShape, TokenShape{11, 3, 4}}) {  // D = 4: lanes span 2 heads
    const int64_t C = s.heads * s.dim;
    const Pair v = random_pair(s.shape(), dtype, 1);
    const Pair u = random_pair({s.tokens, C}, dtype, 2);
    const Pair ve = random_pair(s.shape(), dtype, 3);
    const Pair gate = random_pair({s.heads, 2 * kValueGateLanes}, dtype, 4, 0.5);
    Tensor out_cpu = Tensor::empty(s.shape(), dtype);
    Tensor out_gpu = Tensor::empty(s.shape(), dtype, Device::cuda);
    poison(out_gpu);
    value_gate_forward(v.cpu, u.cpu, ve.cpu, gate.cpu, out_cpu);
    value_gate_forward(v.cuda, u.cuda, ve.cuda, gate.cuda, out_gpu);
    EXPECT_LT(relative_frobenius(out_gpu, out_cpu), tolerance_for(dtype)) << shape_string(s.shape());

    const Pair dv_out = random_pair(s.shape(), dtype, 5);
    const Tensor dv0 = testing::random_tensor(s.shape(), dtype, 6);
    const Tensor du0 = testing::random_tensor({s.tokens, C}, dtype, 7);
    const Tensor dve0 = testing::random_tensor(s.shape(), dtype, 8);
    const Tensor dgate0 = testing::random_tensor({s.heads, 2 * kValueGateLanes}, dtype, 9);
    Tensor dv_c = dv0.clone(), du_c = du0.clone(), dve_c = dve0.clone(), dgate_c = dgate0.clone();
    Tensor dv_g = dv0.to(Device::cuda), du_g = du0.to(Device::cuda), dve_g = dve0.to(Device::cuda),
           dgate_g = dgate0.to(Device::cuda);
    value_gate_backward(dv_out.cpu, u.cpu, ve.cpu, gate.cpu, dv_c, du_c, dve_c, dgate_c);
    value_gate_backward(dv_out.cuda, u.cuda, ve.cuda, gate.cuda, dv_g, du_g, dve_g, dgate_g);
    const double tol = backward_tolerance(dtype);
    EXPECT_LT(added_error(dv_g, dv_c, dv0), tol) << "dv " << shape_string(s.shape());
    EXPECT_LT(added_error(du_g, du_c, du0), tol) << "du " << shape_string(s.shape());
    EXPECT_LT(added_error(dve_g, dve_c, dve0), tol) << "dve " << shape_string(s.shape());
    // dgate sums 16384 products per entry: summation order differs more in bf16.
    EXPECT_LT(added_error(dgate_g, dgate_c, dgate0), dtype == DType::bf16 ? 2e-2 : tol) << "dgate";

    // dv and dve written by their first writer over poison (every element, ve's gate lanes too).
    Tensor wv_c = Tensor::empty(s.shape(), dtype), wve_c = Tensor::empty(s.shape(), dtype);
    Tensor wv_g = Tensor::empty(s.shape(), dtype, Device::cuda), wve_g = Tensor::empty(s.shape(), dtype, Device::cuda);
    poison(wv_g);
    poison(wve_g);
    Tensor wu_c = du0.clone(), wu_g = du0.to(Device::cuda), wgate_c = dgate0.clone(), wgate_g = dgate0.to(Device::cuda);
    value_gate_backward(dv_out.cpu, u.cpu, ve.cpu, gate.cpu, wv_c, wu_c, wve_c, wgate_c, GradWrite::overwrite,
                        GradWrite::overwrite);
    value_gate_backward(dv_out.cuda, u.cuda, ve.cuda, gate.cuda, wv_g, wu_g, wve_g, wgate_g, GradWrite::overwrite,
                        GradWrite::overwrite);
    EXPECT_LT(relative_frobenius(wv_g, wv_c), tol) << "written dv " << shape_string(s.shape());
    EXPECT_LT(relative_frobenius(wve_g, wve_c), tol) << "written dve " << shape_string(s.shape());
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ValueGateCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         dtype_param_name);

}  // namespace
}  // namespace gpt
