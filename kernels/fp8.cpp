#include "kernels/fp8.h"

#include <cmath>

#include "kernels/dispatch.h"

namespace gpt {

namespace {

struct Fp8Format {
  int mantissa_bits;
  int bias;
  float max_finite;
  uint8_t nan_bits;  // without the sign
};
constexpr Fp8Format kE4m3{3, 7, kE4m3Max, 0x7F};
constexpr Fp8Format kE5m2{2, 15, kE5m2Max, 0x7F};

uint8_t encode(float v, const Fp8Format& f) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  if (std::isnan(v)) return static_cast<uint8_t>(sign | f.nan_bits);
  double a = std::fabs(static_cast<double>(v));
  if (a == 0.0) return sign;
  if (std::isinf(a)) a = f.max_finite;  // saturation; ilogb(inf) would not give a usable exponent
  const int min_exponent = 1 - f.bias;  // exponent of the smallest normal
  int e = std::ilogb(a);
  if (e < min_exponent) e = min_exponent;  // subnormal range shares the smallest normal's quantum
  const double quantum = std::ldexp(1.0, e - f.mantissa_bits);
  a = std::nearbyint(a / quantum) * quantum;  // exact division; nearbyint rounds ties to even
  if (a > f.max_finite) a = f.max_finite;     // saturation (infinities included)
  if (a < std::ldexp(1.0, min_exponent)) {
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(a / std::ldexp(1.0, min_exponent - f.mantissa_bits)));
  }
  const int e2 = std::ilogb(a);  // may have moved up by rounding
  const int mantissa = static_cast<int>(a / std::ldexp(1.0, e2 - f.mantissa_bits)) - (1 << f.mantissa_bits);
  return static_cast<uint8_t>(sign | ((e2 + f.bias) << f.mantissa_bits) | mantissa);
}

float decode(uint8_t bits, const Fp8Format& f) {
  const bool negative = (bits & 0x80) != 0;
  const int exp_field = (bits & 0x7F) >> f.mantissa_bits;
  const int mantissa = bits & ((1 << f.mantissa_bits) - 1);
  const int max_exp_field = (0x7F >> f.mantissa_bits);
  double v;
  if (f.mantissa_bits == 3 && (bits & 0x7F) == 0x7F) {
    v = NAN;  // e4m3: only S.1111.111 is NaN
  } else if (f.mantissa_bits == 2 && exp_field == max_exp_field) {
    v = mantissa == 0 ? INFINITY : NAN;  // e5m2 keeps IEEE specials
  } else if (exp_field == 0) {
    v = std::ldexp(static_cast<double>(mantissa), 1 - f.bias - f.mantissa_bits);
  } else {
    v = std::ldexp(static_cast<double>(mantissa + (1 << f.mantissa_bits)), exp_field - f.bias - f.mantissa_bits);
  }
  return static_cast<float>(negative ? -v : v);
}

const Fp8Format& format_of(DType dtype) {
  GPT_CHECK(is_fp8(dtype), "fp8: expected dtype e4m3 or e5m2, got ", dtype_name(dtype));
  return dtype == DType::e4m3 ? kE4m3 : kE5m2;
}

void check_scale(const Tensor& scale, const char* what) {
  check_shape(scale, {1}, what);
  check_dtype(scale, DType::f32, what);
}

}  // namespace

uint8_t float_to_e4m3(float v) { return encode(v, kE4m3); }
uint8_t float_to_e5m2(float v) { return encode(v, kE5m2); }
float e4m3_to_float(uint8_t bits) { return decode(bits, kE4m3); }
float e5m2_to_float(uint8_t bits) { return decode(bits, kE5m2); }
uint8_t float_to_fp8(float v, DType format) { return encode(v, format_of(format)); }
float fp8_to_float(uint8_t bits, DType format) { return decode(bits, format_of(format)); }
bool is_fp8(DType dtype) { return dtype == DType::e4m3 || dtype == DType::e5m2; }

void quantize_fp8(const Tensor& x, const Tensor& scale, Tensor& q) {
  GPT_CHECK(x.defined() && is_floating(x.dtype()), "quantize_fp8: x must be floating, got ", x.describe());
  GPT_CHECK(q.defined() && is_fp8(q.dtype()), "quantize_fp8: q must be e4m3 or e5m2, got ", q.describe());
  check_shape(q, x.shape(), "quantize_fp8: q");
  check_scale(scale, "quantize_fp8: scale");
  check_same_device({&x, &scale, &q}, "quantize_fp8");
  GPT_BACKEND_CALL(x.device(), quantize_fp8, x, scale, q);
}

void dequantize_fp8(const Tensor& q, const Tensor& scale, Tensor& x) {
  GPT_CHECK(q.defined() && is_fp8(q.dtype()), "dequantize_fp8: q must be e4m3 or e5m2, got ", q.describe());
  GPT_CHECK(x.defined() && is_floating(x.dtype()), "dequantize_fp8: x must be floating, got ", x.describe());
  check_shape(x, q.shape(), "dequantize_fp8: x");
  check_scale(scale, "dequantize_fp8: scale");
  check_same_device({&x, &scale, &q}, "dequantize_fp8");
  GPT_BACKEND_CALL(q.device(), dequantize_fp8, q, scale, x);
}

void amax(const Tensor& x, Tensor& out) {
  GPT_CHECK(x.defined() && is_floating(x.dtype()), "amax: x must be floating, got ", x.describe());
  check_scale(out, "amax: out");
  check_same_device({&x, &out}, "amax");
  GPT_BACKEND_CALL(x.device(), amax, x, out);
}

void relu_square_quantize_fp8(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max) {
  GPT_CHECK(pre.defined() && is_floating(pre.dtype()), "relu_square_quantize_fp8: pre must be floating, got ",
            pre.describe());
  GPT_CHECK(post.defined() && post.dtype() == pre.dtype(), "relu_square_quantize_fp8: post must have pre's dtype ",
            dtype_name(pre.dtype()), ", got ", post.describe());
  GPT_CHECK(q.defined() && is_fp8(q.dtype()), "relu_square_quantize_fp8: q must be e4m3 or e5m2, got ", q.describe());
  check_shape(post, pre.shape(), "relu_square_quantize_fp8: post");
  check_shape(q, pre.shape(), "relu_square_quantize_fp8: q");
  check_scale(scale, "relu_square_quantize_fp8: scale");
  check_scale(post_max, "relu_square_quantize_fp8: post_max");
  check_same_device({&pre, &scale, &post, &q, &post_max}, "relu_square_quantize_fp8");
  GPT_BACKEND_CALL(pre.device(), relu_square_quantize_fp8, pre, scale, post, q, post_max);
}

void scale_from_amax(const Tensor& amax, float factor, float floor, Tensor& scale) {
  check_scale(amax, "scale_from_amax: amax");
  check_scale(scale, "scale_from_amax: scale");
  check_same_device({&amax, &scale}, "scale_from_amax");
  GPT_BACKEND_CALL(scale.device(), scale_from_amax, amax, factor, floor, scale);
}

void amax_scale(const Tensor& x, float factor, float floor, Tensor& scale) {
  GPT_CHECK(x.defined() && is_floating(x.dtype()), "amax_scale: x must be floating, got ", x.describe());
  check_scale(scale, "amax_scale: scale");
  check_same_device({&x, &scale}, "amax_scale");
  GPT_BACKEND_CALL(x.device(), amax_scale, x, factor, floor, scale);
}

void fp8_gemm(const Tensor& a8, const Tensor& b8, const Tensor& a_scale, const Tensor& b_scale, Tensor& c,
              const GemmArgs& args, Fp8Accumulation accumulation) {
  GPT_CHECK(a8.defined() && is_fp8(a8.dtype()), "fp8_gemm: A must be e4m3 or e5m2, got ", a8.describe());
  GPT_CHECK(b8.defined() && is_fp8(b8.dtype()), "fp8_gemm: B must be e4m3 or e5m2, got ", b8.describe());
  GPT_CHECK(!(a8.dtype() == DType::e5m2 && b8.dtype() == DType::e5m2), "fp8_gemm: e5m2 x e5m2 is not supported");
  GPT_CHECK(c.dtype() == DType::f32 || c.dtype() == DType::bf16, "fp8_gemm: C must be f32 or bf16, got ", c.describe());
  check_scale(a_scale, "fp8_gemm: a_scale");
  check_scale(b_scale, "fp8_gemm: b_scale");
  GPT_CHECK(a8.ndim() == 2 && b8.ndim() == 2 && c.ndim() == 2, "fp8_gemm: operands must be 2-D, got ", a8.describe(),
            ", ", b8.describe(), ", ", c.describe());
  const int64_t m = args.trans_a ? a8.size(1) : a8.size(0), k = args.trans_a ? a8.size(0) : a8.size(1);
  const int64_t kb = args.trans_b ? b8.size(1) : b8.size(0), n = args.trans_b ? b8.size(0) : b8.size(1);
  GPT_CHECK(k == kb, "fp8_gemm: inner dimensions differ (", a8.describe(), ", ", b8.describe(), ")");
  check_shape(c, {m, n}, "fp8_gemm: C");
  check_same_device({&a8, &b8, &a_scale, &b_scale, &c}, "fp8_gemm");
  GPT_BACKEND_CALL(c.device(), fp8_gemm, a8, b8, a_scale, b_scale, c, args, accumulation);
}

}  // namespace gpt
