// cuda::attention_forward / attention_backward (bf16, head dim 128) against the CPU reference run in f64 on the
// same bf16-representable inputs, over several segment layouts (empty and trailing-empty segments, segments shorter
// and longer than the window, a block of 64 queries spanning several segments) and windows.
//
// Tolerances (relative Frobenius error): y 1e-2 — y is rounded to bf16 (≈2^-9 relative) and the kernel feeds P to
// the tensor cores as bf16; lse 1e-5 (fp32 softmax statistics of exactly the same logits); dq, dk, dv 2e-2 — P and
// dS enter the tensor cores as bf16 and each gradient is rounded to bf16 once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/attention.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt {
namespace {

using gpu_testing::poison;
using gpu_testing::relative_frobenius;

constexpr double kTolY = 1e-2, kTolLse = 1e-5, kTolGrad = 2e-2;

Tensor cu_tensor(const std::vector<int32_t>& values, Device device) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i32);
  for (size_t i = 0; i < values.size(); ++i) t.data<int32_t>()[i] = values[i];
  return t.to(device);
}

struct Layout {
  std::string name;
  std::vector<int32_t> cu;  // last entry = T
  int heads;
  int64_t window;
  float scale;
};

void PrintTo(const Layout& l, std::ostream* os) { *os << l.name; }

class AttentionGpu : public ::testing::TestWithParam<Layout> {};

TEST_P(AttentionGpu, ForwardAndBackwardMatchF64Reference) {
  GPT_REQUIRE_CUDA();
  const Layout& p = GetParam();
  const int64_t T = p.cu.back(), H = p.heads, D = 128;
  const Shape shape{T, H, D};
  // bf16 inputs; the reference sees the same values in f64.
  auto input = [&](uint64_t seed) { return testing::random_tensor(shape, DType::bf16, seed); };
  const Tensor q = input(1), k = input(2), v = input(3), dy = input(4);
  const Tensor dq0 = input(5), dk0 = input(6), dv0 = input(7);  // backward accumulates into these
  const Tensor cu_cpu = cu_tensor(p.cu, Device::cpu), cu_gpu = cu_tensor(p.cu, Device::cuda);

  // Reference in f64.
  const Tensor q64 = q.to(DType::f64), k64 = k.to(DType::f64), v64 = v.to(DType::f64);
  Tensor y_ref = Tensor::empty(shape, DType::f64), lse_ref = Tensor::empty({H, T}, DType::f64);
  attention_forward(q64, k64, v64, cu_cpu, y_ref, lse_ref, p.window, p.scale);
  Tensor dq_ref = dq0.to(DType::f64), dk_ref = dk0.to(DType::f64), dv_ref = dv0.to(DType::f64);
  // The reference backward uses its own y; the GPU backward uses the GPU's y (both are "the forward's output").
  attention_backward(dy.to(DType::f64), q64, k64, v64, cu_cpu, y_ref, lse_ref, dq_ref, dk_ref, dv_ref, p.window,
                     p.scale);

  const Tensor qg = q.to(Device::cuda), kg = k.to(Device::cuda), vg = v.to(Device::cuda);
  Tensor y = Tensor::empty(shape, DType::bf16, Device::cuda), lse = Tensor::empty({H, T}, DType::f32, Device::cuda);
  poison(y);
  poison(lse);
  attention_forward(qg, kg, vg, cu_gpu, y, lse, p.window, p.scale);
  Tensor dq = dq0.to(Device::cuda), dk = dk0.to(Device::cuda), dv = dv0.to(Device::cuda);
  attention_backward(dy.to(Device::cuda), qg, kg, vg, cu_gpu, y, lse, dq, dk, dv, p.window, p.scale);
  GPT_CUDA_CHECK(cudaDeviceSynchronize());

  EXPECT_LT(relative_frobenius(y, y_ref), kTolY) << "y";
  EXPECT_LT(relative_frobenius(lse, lse_ref), kTolLse) << "lse";
  // Gradients: compare the increments (the accumulated start values would hide small errors).
  auto increment = [](const Tensor& after, const Tensor& before) {
    std::vector<double> a = after.to_doubles();
    const std::vector<double> b = before.to_doubles();
    for (size_t i = 0; i < a.size(); ++i) a[i] -= b[i];
    return a;
  };
  EXPECT_LT(gpu_testing::relative_frobenius(increment(dq, dq0), increment(dq_ref, dq0)), kTolGrad) << "dq";
  EXPECT_LT(gpu_testing::relative_frobenius(increment(dk, dk0), increment(dk_ref, dk0)), kTolGrad) << "dk";
  EXPECT_LT(gpu_testing::relative_frobenius(increment(dv, dv0), increment(dv_ref, dv0)), kTolGrad) << "dv";
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, AttentionGpu,
    ::testing::Values(
        Layout{"one_segment_full_causal", {0, 300}, 2, 1000, 0.12f},
        Layout{"one_segment_window_100", {0, 300}, 1, 100, 0.12f},
        Layout{"documents_with_empty_and_trailing_empty", {0, 37, 37, 200, 513, 700, 700, 700}, 3, 128, 0.12f},
        Layout{"window_zero_sees_itself", {0, 90, 190}, 2, 0, 0.12f},
        Layout{"many_tiny_segments", {0, 1, 3, 6, 10, 11, 16, 20, 27, 33, 40, 40}, 1, 640, 0.2f},
        Layout{"leading_empty_segment_sharper_scale", {0, 0, 129, 257}, 2, 64, 0.3f},
        Layout{"recipe_like_window_640", {0, 1000, 2077, 2125, 2125}, 2, 640, 0.12f}),
    [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

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
