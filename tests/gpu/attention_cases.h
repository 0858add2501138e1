#pragma once
// The cases of the CUDA attention tests (tests/gpu/attention_gpu_test.cpp: the production kernels;
// tests/ladder/attention_ladder_test.cpp: the kernel ladder): the f64 CPU reference on the same bf16-representable
// inputs over several segment layouts (empty and trailing-empty segments, segments shorter and longer than the
// window, segments of one token beside long ones, blocks of 64 or 128 queries spanning several segments) and windows
// (0, 1, and 63/64/65, 127/128/129 around the kernels' tile sizes), and the checks every kernel must pass.
//
// Tolerances (relative Frobenius error): y 1e-2 — y is rounded to bf16 (≈2^-9 relative) and the kernel feeds P to
// the tensor cores as bf16; lse 1e-5 (fp32 softmax statistics of exactly the same logits); dq, dk, dv 2e-2 — P and
// dS enter the tensor cores as bf16 and each gradient is rounded to bf16 once.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cuda/attention/kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt::attention_testing {

using gpu_testing::poison;
using gpu_testing::relative_frobenius;

inline constexpr double kTolY = 1e-2, kTolLse = 1e-5, kTolGrad = 2e-2;

inline Tensor cu_tensor(const std::vector<int32_t>& values, Device device) {
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

inline void PrintTo(const Layout& l, std::ostream* os) { *os << l.name; }

// The f64 CPU reference on bf16-representable inputs, and the same inputs on the GPU.
struct Case {
  Tensor v, dy, dq0, dk0, dv0;                    // inputs the checks need (CPU)
  Tensor y_ref, lse_ref, dq_ref, dk_ref, dv_ref;  // f64 CPU reference
  Tensor qg, kg, vg, dyg, cu_gpu;                 // GPU inputs
  const Layout* layout;
};

inline Case make_case(const Layout& p) {
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
inline GpuForward run_forward(const Case& c, cuda::AttentionForwardFn forward) {
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
inline GpuGrads run_backward(const Case& c, const GpuForward& f, cuda::AttentionBackwardFn backward) {
  const Layout& p = *c.layout;
  GpuGrads g{c.dq0.to(Device::cuda), c.dk0.to(Device::cuda), c.dv0.to(Device::cuda)};
  backward(c.dyg, c.qg, c.kg, c.vg, c.cu_gpu, f.y, f.lse, g.dq, g.dk, g.dv, p.window, p.scale, {});
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  return g;
}

// after − before, element by element (gradients are compared as increments: the accumulated start values would
// hide small errors).
inline std::vector<double> increment(const Tensor& after, const Tensor& before) {
  std::vector<double> a = after.to_doubles();
  const std::vector<double> b = before.to_doubles();
  for (size_t i = 0; i < a.size(); ++i) a[i] -= b[i];
  return a;
}

inline std::vector<Layout> layouts() {
  return {Layout{"one_segment_full_causal", {0, 300}, 2, 1000, 0.12f},
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
          Layout{"recipe_like_window_640", {0, 1000, 2077, 2125, 2125}, 2, 640, 0.12f}};
}

// A recipe-sized slice (12,288 tokens, 6 heads, window 1408, documents of 37 … 3,000 tokens): more blocks than the
// GPU holds at once, so kernels that order their accumulation across blocks (the fused backward) run with most
// blocks waiting on others, and the persistent forward takes several items per block through both of its Q tiles.
// No f64 reference at this size: each kernel must repeat bitwise and agree with one checked against f64.
inline const Layout kRecipeSlice{"recipe_slice", {0, 37, 3037, 3800, 5100, 5101, 7900, 9000, 12288}, 6, 1408, 0.12f};

inline Case recipe_slice_case() {
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

// A forward kernel against the f64 reference of `c`.
inline void expect_forward_matches(const Case& c, cuda::AttentionForwardFn forward) {
  const GpuForward f = run_forward(c, forward);
  EXPECT_LT(relative_frobenius(f.y, c.y_ref), kTolY) << "y";
  EXPECT_LT(relative_frobenius(f.lse, c.lse_ref), kTolLse) << "lse";
}

// A backward kernel, fed `f`, against the f64 reference of `c` (gradients compared as increments).
inline void expect_backward_matches(const Case& c, const GpuForward& f, cuda::AttentionBackwardFn backward) {
  const GpuGrads g = run_backward(c, f, backward);
  EXPECT_LT(relative_frobenius(increment(g.dq, c.dq0), increment(c.dq_ref, c.dq0)), kTolGrad) << "dq";
  EXPECT_LT(relative_frobenius(increment(g.dk, c.dk0), increment(c.dk_ref, c.dk0)), kTolGrad) << "dk";
  EXPECT_LT(relative_frobenius(increment(g.dv, c.dv0), increment(c.dv_ref, c.dv0)), kTolGrad) << "dv";
}

// window = 0: every query attends only its own key, so p = 1, y = v and ds = p·(⟨dy,v⟩ − ⟨dy,y⟩) = 0 exactly —
// the true dq and dk increments are zero and a relative error against them is undefined (‖ref‖ = 0; a dk increment
// of norm 6.7e-7 over the 1e-150 floor of relative_frobenius reads 6.7e143). The kernels leave the rounding residue
// of two f32 sums of 128 products (|ds| ≲ 1e-5), which moves a bf16 start value only when that value is tiny. So:
// dq and dk must stay within 1e-3 of their start values (one wrongly admitted key gives increments of order 0.1, an
// uninitialised or inf·0 value far more), y must equal v to rounding, dv must gain dy.
inline std::vector<Layout> window_zero_layouts() {
  return {Layout{"two_segments", {0, 90, 190}, 2, 0, 0.12f},
          Layout{"tile_straddling_segments", {0, 1, 63, 64, 65, 129, 300}, 3, 0, 0.3f}};
}
inline void expect_forward_copies_values(const Case& c, cuda::AttentionForwardFn forward) {
  const GpuForward f = run_forward(c, forward);
  EXPECT_LT(relative_frobenius(f.y, c.v), 1e-5) << "y = v";
  EXPECT_LT(relative_frobenius(f.lse, c.lse_ref), kTolLse) << "lse";
}
inline void expect_logit_gradients_vanish(const Case& c, const GpuForward& f, cuda::AttentionBackwardFn backward) {
  const GpuGrads g = run_backward(c, f, backward);
  EXPECT_LT(relative_frobenius(increment(g.dv, c.dv0), increment(c.dv_ref, c.dv0)), kTolGrad) << "dv";
  for (const auto& [name, after, before] : {std::tuple{"dq", &g.dq, &c.dq0}, std::tuple{"dk", &g.dk, &c.dk0}}) {
    double worst = 0;
    for (double d : increment(*after, *before)) worst = std::isfinite(d) ? std::max(worst, std::abs(d)) : INFINITY;
    EXPECT_LE(worst, 1e-3) << name << ": largest |increment| where the exact increment is 0";
  }
}

// Two forward kernels that must give the same bits (a persistent block and its one-block-per-item twin compute each
// (query block, head) item alike), on every run however the blocks pick up the items.
inline void expect_forward_bits_equal(const Case& c, cuda::AttentionForwardFn got_fn,
                                      cuda::AttentionForwardFn want_fn) {
  const GpuForward want = run_forward(c, want_fn);
  for (int run = 0; run < 3; ++run) {
    const GpuForward f = run_forward(c, got_fn);
    EXPECT_EQ(f.y.to_doubles(), want.y.to_doubles()) << "y, run " << run;
    EXPECT_EQ(f.lse.to_doubles(), want.lse.to_doubles()) << "lse, run " << run;
  }
}

// A backward kernel repeats bitwise and agrees with `baseline` within the bf16 tolerance.
inline void expect_backward_repeats_and_agrees(const Case& c, const GpuForward& f, cuda::AttentionBackwardFn backward,
                                               const GpuGrads& baseline) {
  const GpuGrads first = run_backward(c, f, backward);
  for (int run = 0; run < 2; ++run) {
    const GpuGrads again = run_backward(c, f, backward);
    EXPECT_EQ(again.dq.to_doubles(), first.dq.to_doubles()) << "dq differs on repeat " << run;
    EXPECT_EQ(again.dk.to_doubles(), first.dk.to_doubles()) << "dk differs on repeat " << run;
    EXPECT_EQ(again.dv.to_doubles(), first.dv.to_doubles()) << "dv differs on repeat " << run;
  }
  for (const auto& [name, got, want, start] :
       {std::tuple{"dq", &first.dq, &baseline.dq, &c.dq0}, std::tuple{"dk", &first.dk, &baseline.dk, &c.dk0},
        std::tuple{"dv", &first.dv, &baseline.dv, &c.dv0}}) {
    EXPECT_LT(relative_frobenius(increment(*got, *start), increment(*want, *start)), kTolGrad)
        << name << " vs baseline";
  }
}

inline void expect_grads_bits_equal(const GpuGrads& got, const GpuGrads& want) {
  EXPECT_EQ(got.dq.to_doubles(), want.dq.to_doubles()) << "dq";
  EXPECT_EQ(got.dk.to_doubles(), want.dk.to_doubles()) << "dk";
  EXPECT_EQ(got.dv.to_doubles(), want.dv.to_doubles()) << "dv";
}

// AttentionGradWrites: an overwritten gradient (written over NaN poison) has exactly the bits that adding into zeros
// gives, each gradient on its own (the others keep adding into their start values).
inline void expect_overwrite_equals_adding_into_zeros(const Case& c, const GpuForward& f,
                                                      cuda::AttentionBackwardFn backward) {
  const Layout& p = *c.layout;
  const Tensor zeros = Tensor::zeros(c.dq0.shape(), DType::bf16, Device::cuda);
  GpuGrads into_zeros{zeros.clone(), zeros.clone(), zeros.clone()};
  backward(c.dyg, c.qg, c.kg, c.vg, c.cu_gpu, f.y, f.lse, into_zeros.dq, into_zeros.dk, into_zeros.dv, p.window,
           p.scale, {});
  const GpuGrads added = run_backward(c, f, backward);
  for (int which = 0; which < 3; ++which) {
    AttentionGradWrites writes;
    GpuGrads g{c.dq0.to(Device::cuda), c.dk0.to(Device::cuda), c.dv0.to(Device::cuda)};
    Tensor* written[] = {&g.dq, &g.dk, &g.dv};
    GradWrite* mode[] = {&writes.dq, &writes.dk, &writes.dv};
    poison(*written[which]);
    *mode[which] = GradWrite::overwrite;
    backward(c.dyg, c.qg, c.kg, c.vg, c.cu_gpu, f.y, f.lse, g.dq, g.dk, g.dv, p.window, p.scale, writes);
    GPT_CUDA_CHECK(cudaDeviceSynchronize());
    const Tensor* want_written[] = {&into_zeros.dq, &into_zeros.dk, &into_zeros.dv};
    const Tensor* want_added[] = {&added.dq, &added.dk, &added.dv};
    for (int t = 0; t < 3; ++t) {
      const Tensor& want = t == which ? *want_written[t] : *want_added[t];
      EXPECT_EQ(written[t]->to_doubles(), want.to_doubles()) << "gradient " << t << ", overwriting " << which;
    }
  }
}

}  // namespace gpt::attention_testing
