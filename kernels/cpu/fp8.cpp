// CPU reference of kernels/fp8.h: FP8 values are emulated exactly (every fp8 value is an fp32 value).
#include <cmath>
#include <vector>

#include "kernels/activation.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/fp8.h"
#include "kernels/transpose.h"

namespace gpt::cpu {

namespace {

constexpr int64_t kParallelMin = 1 << 15;

std::vector<float> widen_fp8(const Tensor& q) {
  const auto* p = static_cast<const uint8_t*>(q.raw());
  const DType format = q.dtype();
  std::vector<float> out(static_cast<size_t>(q.numel()));
  const int64_t n = q.numel();
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = fp8_to_float(p[i], format);
  return out;
}

}  // namespace

void quantize_fp8(const Tensor& x, const Tensor& scale, Tensor& q) {
  const float s = scale.data<float>()[0];
  auto* qp = static_cast<uint8_t*>(q.raw());
  const DType format = q.dtype();
  const int64_t n = x.numel();
  dispatch_floating(x.dtype(), "quantize_fp8", [&]<typename T>() {
    const T* xp = x.data<T>();
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) qp[i] = float_to_fp8(static_cast<float>(load(xp[i])) / s, format);
  });
}

void dequantize_fp8(const Tensor& q, const Tensor& scale, Tensor& x) {
  const float s = scale.data<float>()[0];
  const auto* qp = static_cast<const uint8_t*>(q.raw());
  const DType format = q.dtype();
  const int64_t n = q.numel();
  dispatch_floating(x.dtype(), "dequantize_fp8", [&]<typename T>() {
    T* xp = x.data<T>();
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) xp[i] = store<T>(fp8_to_float(qp[i], format) * s);
  });
}

void amax(const Tensor& x, Tensor& out) {
  const int64_t n = x.numel();
  dispatch_floating(x.dtype(), "amax", [&]<typename T>() {
    const T* xp = x.data<T>();
    double m = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double a = std::fabs(static_cast<double>(load(xp[i])));
      if (std::isnan(a)) {
        m = NAN;
        break;
      }
      m = std::max(m, a);
    }
    out.data<float>()[0] = static_cast<float>(m);
  });
}

void relu_square_quantize_fp8(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max) {
  cpu::relu_square_forward(pre, post);
  cpu::quantize_fp8(post, scale, q);
  cpu::amax(post, post_max);
}

void scale_from_amax(const Tensor& amax, float factor, float floor, Tensor& scale) {
  scale.data<float>()[0] = std::max(amax.data<float>()[0], floor) * factor;
}

void amax_scale(const Tensor& x, float factor, float floor, Tensor& scale) {
  Tensor measured = Tensor::empty({1}, DType::f32);
  cpu::amax(x, measured);
  cpu::scale_from_amax(measured, factor, floor, scale);
}

// Exact fp32 accumulation whatever `accumulation` asks for: the reference the fast mode is measured against.
void fp8_gemm(const Tensor& a8, const Tensor& b8, const Tensor& a_scale, const Tensor& b_scale, Tensor& c,
              const GemmArgs& args, Fp8Accumulation /*accumulation*/) {
  // Both operands widened K-contiguous (A [M, K], B [N, K]) as the CUDA path feeds the tensor cores: the product
  // then sums in one order whichever layout an operand is stored in, so a caller may keep a transposed copy of an
  // operand (kernels/fp8_linear.h) and get the same bits.
  auto k_contiguous = [](const Tensor& q, bool transposed) {
    const Tensor wide = Tensor::from_floats(widen_fp8(q), q.shape(), DType::f32);
    if (!transposed) return wide;
    Tensor out = Tensor::empty({q.size(1), q.size(0)}, DType::f32);
    cpu::transpose(wide, out);
    return out;
  };
  const Tensor a = k_contiguous(a8, args.trans_a), b = k_contiguous(b8, !args.trans_b);
  GemmArgs scaled{.trans_a = false, .trans_b = true, .alpha = args.alpha, .beta = args.beta};
  scaled.alpha = args.alpha * a_scale.data<float>()[0] * b_scale.data<float>()[0];
  if (c.dtype() == DType::f32) {
    cpu::gemm(a, b, c, scaled);
    return;
  }
  // bf16 C: fp32 result (seeded with C for beta), rounded once.
  Tensor c32 = args.beta != 0.0f ? c.to(DType::f32) : Tensor::zeros(c.shape(), DType::f32);
  cpu::gemm(a, b, c32, scaled);
  const float* src = c32.data<float>();
  bf16* dst = c.data<bf16>();
  for (int64_t i = 0; i < c.numel(); ++i) dst[i] = bf16(src[i]);
}

}  // namespace gpt::cpu
