// cuda::attention_forward / attention_backward (bf16, head dim 128) against the CPU reference run in f64 on the
// same bf16-representable inputs, over several segment layouts (empty and trailing-empty segments, segments shorter
// and longer than the window, segments of one token beside long ones, blocks of 64 or 128 queries spanning several
// segments) and windows (0, 1, and 63/64/65, 127/128/129 around the kernels' tile sizes), for every kernel version.
//
// Tolerances (relative Frobenius error): y 1e-2 — y is rounded to bf16 (≈2^-9 relative) and the kernel feeds P to
// the tensor cores as bf16; lse 1e-5 (fp32 softmax statistics of exactly the same logits); dq, dk, dv 2e-2 — P and
// dS enter the tensor cores as bf16 and each gradient is rounded to bf16 once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cuda/attention_variants.h"
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

// The f64 CPU reference on bf16-representable inputs, and the same inputs on the GPU.
struct Case {
  Tensor v, dy, dq0, dk0, dv0;                    // inputs the checks need (CPU)
  Tensor y_ref, lse_ref, dq_ref, dk_ref, dv_ref;  // f64 CPU reference
  Tensor qg, kg, vg, dyg, cu_gpu;                 // GPU inputs
  const Layout* layout;
};

Case make_case(const Layout& p) {
  const int64_t T = p.cu.back(), H = p.heads, D = 128;
  const Shape shape{T, H, D};
  auto input = [&](uint64_t seed) { return testing::random_tensor(shape, DType::bf16, seed); };
  Case c;
  c.layout = &p;
  const Tensor q = input(1), k = input(2);
  c.v = input(3);
  c.dy = input(4);
  c.dq0 = input(5);  // the backward accumulates into these
  c.dk0 = input(6);
  c.dv0 = input(7);
  const Tensor cu_cpu = cu_tensor(p.cu, Device::cpu);
  const Tensor q64 = q.to(DType::f64), k64 = k.to(DType::f64), v64 = c.v.to(DType::f64);
  c.y_ref = Tensor::empty(shape, DType::f64);
  c.lse_ref = Tensor::empty({H, T}, DType::f64);
  attention_forward(q64, k64, v64, cu_cpu, c.y_ref, c.lse_ref, p.window, p.scale);
  c.dq_ref = c.dq0.to(DType::f64);
  c.dk_ref = c.dk0.to(DType::f64);
  c.dv_ref = c.dv0.to(DType::f64);
  // The reference backward uses its own y; the GPU backward uses the GPU's y (both are "the forward's output").
  attention_backward(c.dy.to(DType::f64), q64, k64, v64, cu_cpu, c.y_ref, c.lse_ref, c.dq_ref, c.dk_ref, c.dv_ref,
                     p.window, p.scale);
  c.qg = q.to(Device::cuda);
  c.kg = k.to(Device::cuda);
  c.vg = c.v.to(Device::cuda);
  c.dyg = c.dy.to(Device::cuda);
  c.cu_gpu = cu_tensor(p.cu, Device::cuda);
  return c;
}

struct GpuForward {
  Tensor y, lse;
};
GpuForward run_forward(const Case& c, cuda::AttentionForwardFn forward) {
  const Layout& p = *c.layout;
  GpuForward f{Tensor::empty(c.qg.shape(), DType::bf16, Device::cuda),
               Tensor::empty({p.heads, p.cu.back()}, DType::f32, Device::cuda)};
  poison(f.y);
  poison(f.lse);
  forward(c.qg, c.kg, c.vg, c.cu_gpu, f.y, f.lse, p.window, p.scale);
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  return f;
}

struct GpuGrads {
  Tensor dq, dk, dv;
};
GpuGrads run_backward(const Case& c, const GpuForward& f, cuda::AttentionBackwardFn backward) {
  const Layout& p = *c.layout;
  GpuGrads g{c.dq0.to(Device::cuda), c.dk0.to(Device::cuda), c.dv0.to(Device::cuda)};
  backward(c.dyg, c.qg, c.kg, c.vg, c.cu_gpu, f.y, f.lse, g.dq, g.dk, g.dv, p.window, p.scale, {});
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  return g;
}

// after − before, element by element (gradients are compared as increments: the accumulated start values would
// hide small errors).
std::vector<double> increment(const Tensor& after, const Tensor& before) {
  std::vector<double> a = after.to_doubles();
  const std::vector<double> b = before.to_doubles();
  for (size_t i = 0; i < a.size(); ++i) a[i] -= b[i];
  return a;
}

// Every kernel version (attention_variants.h) on every layout: forward versions against y and lse, backward
// versions (fed the promoted forward's y and lse) against the gradients.
class AttentionGpu : public ::testing::TestWithParam<Layout> {};

TEST_P(AttentionGpu, ForwardAndBackwardMatchF64Reference) {
  GPT_REQUIRE_CUDA();
  const Case c = make_case(GetParam());
  for (const auto& variant : cuda::kAttentionForwardVariants) {
    SCOPED_TRACE(std::string("forward ") + variant.name);
    const GpuForward f = run_forward(c, variant.fn);
    EXPECT_LT(relative_frobenius(f.y, c.y_ref), kTolY) << "y";
    EXPECT_LT(relative_frobenius(f.lse, c.lse_ref), kTolLse) << "lse";
  }
  const GpuForward f = run_forward(c, cuda::attention_forward);
  for (const auto& variant : cuda::kAttentionBackwardVariants) {
    SCOPED_TRACE(std::string("backward ") + variant.name);
    const GpuGrads g = run_backward(c, f, variant.fn);
    EXPECT_LT(relative_frobenius(increment(g.dq, c.dq0), increment(c.dq_ref, c.dq0)), kTolGrad) << "dq";
    EXPECT_LT(relative_frobenius(increment(g.dk, c.dk0), increment(c.dk_ref, c.dk0)), kTolGrad) << "dk";
    EXPECT_LT(relative_frobenius(increment(g.dv, c.dv0), increment(c.dv_ref, c.dv0)), kTolGrad) << "dv";
  }
}

// window = 0: every query attends only its own key, so p = 1, y = v and ds = p·(⟨dy,v⟩ − ⟨dy,y⟩) = 0 exactly —
// the true dq and dk increments are zero and a relative error against them is undefined (‖ref‖ = 0; the H200 run
// of 2026-12-02 reported 6.7e143 = a dk increment of norm 6.7e-7 over the 1e-150 floor of relative_frobenius).
// The kernels leave the rounding residue of two f32 sums of 128 products (|ds| ≲ 1e-5), which moves a bf16 start
// value only when that value is tiny. So: dq and dk must stay within 1e-3 of their start values (one wrongly
// admitted key gives increments of order 0.1, an uninitialised or inf·0 value far more), y must equal v to
// rounding, dv must gain dy.
TEST(AttentionGpuWindowZero, EachQueryCopiesItsValueAndLogitGradientsVanish) {
  GPT_REQUIRE_CUDA();
  const Layout layouts[] = {Layout{"two_segments", {0, 90, 190}, 2, 0, 0.12f},
                            Layout{"tile_straddling_segments", {0, 1, 63, 64, 65, 129, 300}, 3, 0, 0.3f}};
  for (const Layout& p : layouts) {
    const Case c = make_case(p);
    for (const auto& variant : cuda::kAttentionForwardVariants) {
      SCOPED_TRACE(p.name + " forward " + variant.name);
      const GpuForward f = run_forward(c, variant.fn);
      EXPECT_LT(relative_frobenius(f.y, c.v), 1e-5) << "y = v";
      EXPECT_LT(relative_frobenius(f.lse, c.lse_ref), kTolLse) << "lse";
    }
    const GpuForward f = run_forward(c, cuda::attention_forward);
    for (const auto& variant : cuda::kAttentionBackwardVariants) {
      SCOPED_TRACE(p.name + " backward " + variant.name);
      const GpuGrads g = run_backward(c, f, variant.fn);
      EXPECT_LT(relative_frobenius(increment(g.dv, c.dv0), increment(c.dv_ref, c.dv0)), kTolGrad) << "dv";
      for (const auto& [name, after, before] : {std::tuple{"dq", &g.dq, &c.dq0}, std::tuple{"dk", &g.dk, &c.dk0}}) {
        double worst = 0;
        for (double d : increment(*after, *before)) worst = std::isfinite(d) ? std::max(worst, std::abs(d)) : INFINITY;
        EXPECT_LE(worst, 1e-3) << name << ": largest |increment| where the exact increment is 0";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, AttentionGpu,
    ::testing::Values(
        Layout{"one_segment_full_causal", {0, 300}, 2, 1000, 0.12f},
        Layout{"one_segment_window_100", {0, 300}, 1, 100, 0.12f},
        Layout{"documents_with_empty_and_trailing_empty", {0, 37, 37, 200, 513, 700, 700, 700}, 3, 128, 0.12f},
        Layout{"window_one", {0, 300}, 2, 1, 0.12f},
        Layout{"window_63_segments_around_tiles", {0, 63, 127, 128, 256, 385, 600}, 2, 63, 0.12f},
        Layout{"window_64_segments_around_tiles", {0, 64, 65, 192, 321, 600}, 2, 64, 0.12f},
        Layout{"window_65_long_segment", {0, 600}, 1, 65, 0.12f},
        Layout{"window_127_128_129_tiles", {0, 127, 255, 384, 513, 700}, 2, 127, 0.12f},
        Layout{"window_128_long_segment", {0, 700}, 1, 128, 0.12f},
        Layout{"window_129_with_unit_segments", {0, 1, 2, 300, 301, 302, 700}, 1, 129, 0.12f},
        Layout{"unit_segments_beside_long_ones", {0, 1, 200, 201, 202, 203, 459, 460, 461}, 2, 640, 0.12f},
        Layout{"many_tiny_segments", {0, 1, 3, 6, 10, 11, 16, 20, 27, 33, 40, 40}, 1, 640, 0.2f},
        Layout{"leading_empty_segment_sharper_scale", {0, 0, 129, 257}, 2, 64, 0.3f},
        Layout{"recipe_like_window_640", {0, 1000, 2077, 2125, 2125}, 2, 640, 0.12f}),
    [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

// A recipe-sized slice (12,288 tokens, 6 heads, window 1408, documents of 37 … 3,000 tokens): more blocks than the
// GPU holds at once, so versions that order their accumulation across blocks (backward v4) run with most blocks
// waiting on others, and the persistent forward (v9) takes several items per block through both of its Q tiles. No
// f64 reference at this size: each version must repeat bitwise and agree with a version checked against f64 above.
const Layout kRecipeSlice{"recipe_slice", {0, 37, 3037, 3800, 5100, 5101, 7900, 9000, 12288}, 6, 1408, 0.12f};

Case recipe_slice_case() {
  const Layout& p = kRecipeSlice;
  Case c;
  c.layout = &p;
  const Shape shape{p.cu.back(), p.heads, 128};
  auto input = [&](uint64_t seed) { return testing::random_tensor(shape, DType::bf16, seed); };
  c.qg = input(11).to(Device::cuda);
  c.kg = input(12).to(Device::cuda);
  c.vg = input(13).to(Device::cuda);
  c.dyg = input(14).to(Device::cuda);
  c.dq0 = input(15);
  c.dk0 = input(16);
  c.dv0 = input(17);
  c.cu_gpu = cu_tensor(p.cu, Device::cuda);
  return c;
}

// Every forward version within the bf16 tolerance of v8. The persistent versions compute each (query block, head)
// item exactly as their one-block-per-item twins do (same rows per block, same key tiles in the same order): v9
// must match v8, v11 v10 and v13 v12 bit for bit however the blocks pick up the items, on every run.
TEST(AttentionGpuRecipeSlice, ForwardVersionsAgreeAndPersistentOnesEqualTheirTwins) {
  GPT_REQUIRE_CUDA();
  const auto& versions = cuda::kAttentionForwardVariants;
  ASSERT_STREQ(versions[7].name, "v8");
  const Case c = recipe_slice_case();
  const GpuForward v8 = run_forward(c, versions[7].fn);
  for (const auto& variant : versions) {
    SCOPED_TRACE(std::string("forward ") + variant.name);
    const GpuForward f = run_forward(c, variant.fn);
    EXPECT_LT(relative_frobenius(f.y, v8.y), kTolY) << "y vs v8";
    EXPECT_LT(relative_frobenius(f.lse, v8.lse), kTolLse) << "lse vs v8";
  }
  for (const auto& [persistent, twin] : {std::pair{"v9", "v8"}, std::pair{"v11", "v10"}, std::pair{"v13", "v12"}}) {
    const auto find = [&](const char* name) {
      const auto* it = std::find_if(std::begin(versions), std::end(versions),
                                    [&](const auto& v) { return std::string(v.name) == name; });
      return it == std::end(versions) ? nullptr : it->fn;
    };
    const cuda::AttentionForwardFn persistent_fn = find(persistent), twin_fn = find(twin);
    ASSERT_TRUE(persistent_fn && twin_fn) << persistent << " or " << twin << " is not a forward version";
    const GpuForward want = run_forward(c, twin_fn);
    for (int run = 0; run < 3; ++run) {
      const GpuForward f = run_forward(c, persistent_fn);
      EXPECT_EQ(f.y.to_doubles(), want.y.to_doubles()) << persistent << " y differs from " << twin << ", run " << run;
      EXPECT_EQ(f.lse.to_doubles(), want.lse.to_doubles())
          << persistent << " lse differs from " << twin << ", run " << run;
    }
  }
}

TEST(AttentionGpuRecipeSlice, BackwardVersionsRepeatBitwiseAndAgree) {
  GPT_REQUIRE_CUDA();
  const Case c = recipe_slice_case();
  const GpuForward f = run_forward(c, cuda::attention_forward);
  const GpuGrads baseline = run_backward(c, f, cuda::kAttentionBackwardVariants[2].fn);  // v3
  for (const auto& variant : cuda::kAttentionBackwardVariants) {
    SCOPED_TRACE(std::string("backward ") + variant.name);
    const GpuGrads first = run_backward(c, f, variant.fn);
    for (int run = 0; run < 2; ++run) {
      const GpuGrads again = run_backward(c, f, variant.fn);
      EXPECT_EQ(again.dq.to_doubles(), first.dq.to_doubles()) << "dq differs on repeat " << run;
      EXPECT_EQ(again.dk.to_doubles(), first.dk.to_doubles()) << "dk differs on repeat " << run;
      EXPECT_EQ(again.dv.to_doubles(), first.dv.to_doubles()) << "dv differs on repeat " << run;
    }
    for (const auto& [name, got, want, start] :
         {std::tuple{"dq", &first.dq, &baseline.dq, &c.dq0}, std::tuple{"dk", &first.dk, &baseline.dk, &c.dk0},
          std::tuple{"dv", &first.dv, &baseline.dv, &c.dv0}}) {
      EXPECT_LT(relative_frobenius(increment(*got, *start), increment(*want, *start)), kTolGrad) << name << " vs v3";
    }
  }
  // v6 only reorders v5's products, v7 only delays each tile's dQ product (same sums in the same order): v5's bits.
  ASSERT_STREQ(cuda::kAttentionBackwardVariants[4].name, "v5");
  const GpuGrads v5 = run_backward(c, f, cuda::kAttentionBackwardVariants[4].fn);
  for (const int index : {5, 6}) {
    const auto& variant = cuda::kAttentionBackwardVariants[index];
    SCOPED_TRACE(std::string("backward ") + variant.name + " against v5");
    ASSERT_STREQ(variant.name, index == 5 ? "v6" : "v7");
    const GpuGrads g = run_backward(c, f, variant.fn);
    EXPECT_EQ(g.dq.to_doubles(), v5.dq.to_doubles()) << "dq";
    EXPECT_EQ(g.dk.to_doubles(), v5.dk.to_doubles()) << "dk";
    EXPECT_EQ(g.dv.to_doubles(), v5.dv.to_doubles()) << "dv";
  }
}

// AttentionGradWrites: an overwritten gradient (written over NaN poison) has exactly the bits that adding into zeros
// gives, for every version (v5+ store natively, v4 dq natively, the rest zero-fill first), each gradient on its own
// (the others keep adding into their start values).
TEST(AttentionGpuRecipeSlice, OverwrittenGradientsEqualAddingIntoZeros) {
  GPT_REQUIRE_CUDA();
  const Case c = recipe_slice_case();
  const Layout& p = *c.layout;
  const GpuForward f = run_forward(c, cuda::attention_forward);
  const Tensor zeros = Tensor::zeros(c.dq0.shape(), DType::bf16, Device::cuda);
  for (const auto& variant : cuda::kAttentionBackwardVariants) {
    SCOPED_TRACE(std::string("backward ") + variant.name);
    GpuGrads into_zeros{zeros.clone(), zeros.clone(), zeros.clone()};
    variant.fn(c.dyg, c.qg, c.kg, c.vg, c.cu_gpu, f.y, f.lse, into_zeros.dq, into_zeros.dk, into_zeros.dv, p.window,
               p.scale, {});
    const GpuGrads added = run_backward(c, f, variant.fn);
    for (int which = 0; which < 3; ++which) {
      AttentionGradWrites writes;
      GpuGrads g{c.dq0.to(Device::cuda), c.dk0.to(Device::cuda), c.dv0.to(Device::cuda)};
      Tensor* written[] = {&g.dq, &g.dk, &g.dv};
      GradWrite* mode[] = {&writes.dq, &writes.dk, &writes.dv};
      poison(*written[which]);
      *mode[which] = GradWrite::overwrite;
      variant.fn(c.dyg, c.qg, c.kg, c.vg, c.cu_gpu, f.y, f.lse, g.dq, g.dk, g.dv, p.window, p.scale, writes);
      GPT_CUDA_CHECK(cudaDeviceSynchronize());
      const Tensor* want_written[] = {&into_zeros.dq, &into_zeros.dk, &into_zeros.dv};
      const Tensor* want_added[] = {&added.dq, &added.dk, &added.dv};
      for (int t = 0; t < 3; ++t) {
        const Tensor& want = t == which ? *want_written[t] : *want_added[t];
        EXPECT_EQ(written[t]->to_doubles(), want.to_doubles()) << "gradient " << t << ", overwriting " << which;
      }
    }
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
