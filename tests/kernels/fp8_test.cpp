#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/fp8.h"
#include "kernels/gemm.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

Tensor scale_tensor(float v) { return Tensor::from_floats(std::vector<float>{v}, {1}, DType::f32); }

TEST(Fp8E4m3, EncodesPublishedValues) {
  EXPECT_EQ(float_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_e4m3(-2.0f), 0xC0);
  EXPECT_EQ(float_to_e4m3(448.0f), 0x7E);                    // max finite
  EXPECT_EQ(float_to_e4m3(0.015625f), 0x08);                 // 2^-6, smallest normal
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -9)), 0x01);      // smallest subnormal
  EXPECT_EQ(float_to_e4m3(7 * std::ldexp(1.0f, -9)), 0x07);  // largest subnormal
}

TEST(Fp8E4m3, RoundsToNearestTiesToEven) {
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);                     // 1 + 1/16: tie between 1 and 1.125 -> 1 (even)
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3A);                     // tie between 1.125 and 1.25 -> 1.25 (even)
  EXPECT_EQ(float_to_e4m3(1.07f), 0x39);                       // above the tie -> 1.125
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);       // half the smallest subnormal -> 0 (even)
  EXPECT_EQ(float_to_e4m3(3 * std::ldexp(1.0f, -10)), 0x02);   // tie between 1 and 2 subnormal steps -> 2
  EXPECT_EQ(float_to_e4m3(15 * std::ldexp(1.0f, -10)), 0x08);  // rounds up out of the subnormals into 2^-6
}

TEST(Fp8E4m3, SaturatesAndKeepsNaN) {
  EXPECT_EQ(float_to_e4m3(464.0f), 0x7E);  // midpoint to the next binade step, still 448
  EXPECT_EQ(float_to_e4m3(480.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(1e9f), 0x7E);
  EXPECT_EQ(float_to_e4m3(-1e9f), 0xFE);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()) & 0x7F, 0x7F);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
}

TEST(Fp8E4m3, DecodesAndRoundTripsEveryCode) {
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_float(0xB8), -1.0f);
  EXPECT_EQ(e4m3_to_float(0x3F), 1.875f);
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(code))), code) << code;
  }
}

TEST(Fp8E5m2, EncodesPublishedValuesAndRounds) {
  EXPECT_EQ(float_to_e5m2(1.0f), 0x3C);
  EXPECT_EQ(float_to_e5m2(57344.0f), 0x7B);  // max finite
  EXPECT_EQ(float_to_e5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(float_to_e5m2(std::ldexp(1.0f, -14)), 0x04);  // smallest normal
  EXPECT_EQ(float_to_e5m2(1.125f), 0x3C);                 // tie -> 1 (even)
  EXPECT_EQ(float_to_e5m2(1.375f), 0x3E);                 // tie -> 1.5 (even)
  EXPECT_EQ(float_to_e5m2(std::ldexp(1.0f, -17)), 0x00);  // half the smallest subnormal -> 0
}

TEST(Fp8E5m2, SaturatesAndKeepsNaN) {
  EXPECT_EQ(float_to_e5m2(61440.0f), 0x7B);
  EXPECT_EQ(float_to_e5m2(1e30f), 0x7B);
  EXPECT_EQ(float_to_e5m2(-std::numeric_limits<float>::infinity()), 0xFB);
  EXPECT_TRUE(std::isnan(e5m2_to_float(float_to_e5m2(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(e5m2_to_float(0x7C)));
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7C) == 0x7C) continue;  // infinities and NaNs
    EXPECT_EQ(float_to_e5m2(e5m2_to_float(static_cast<uint8_t>(code))), code) << code;
  }
}

TEST(Fp8Tensor, QuantizeDividesByScaleAndSaturates) {
  Tensor x = Tensor::from_doubles(std::vector<double>{1.0, -3.0, 1000.0, 0.0}, {2, 2}, DType::bf16);
  Tensor q = Tensor::empty({2, 2}, DType::e4m3);
  quantize_fp8(x, scale_tensor(0.5f), q);
  const auto* bits = static_cast<const uint8_t*>(q.raw());
  EXPECT_EQ(bits[0], float_to_e4m3(2.0f));
  EXPECT_EQ(bits[1], float_to_e4m3(-6.0f));
  EXPECT_EQ(bits[2], 0x7E);  // 2000 saturates to 448
  EXPECT_EQ(bits[3], 0x00);
  Tensor back = Tensor::empty({2, 2}, DType::f32);
  dequantize_fp8(q, scale_tensor(0.5f), back);
  EXPECT_EQ(back.to_doubles(), (std::vector<double>{1.0, -3.0, 224.0, 0.0}));
}

TEST(Fp8Tensor, AmaxIsMaxAbsolute) {
  Tensor x = Tensor::from_doubles(std::vector<double>{0.5, -7.25, 3.0}, {3}, DType::bf16);
  Tensor out = Tensor::empty({1}, DType::f32);
  amax(x, out);
  EXPECT_EQ(out.to_doubles()[0], 7.25);
}

// amax_scale is amax then scale_from_amax: the floor for an all-zero x, NaN through both, and the factor applied
// after the floor.
TEST(Fp8Tensor, AmaxScaleIsScaleFromAmaxOfTheMax) {
  Tensor scale = Tensor::empty({1}, DType::f32);
  amax_scale(Tensor::from_doubles(std::vector<double>{0.5, -7.25, 3.0}, {3}, DType::bf16), 2.0f, 1e-12f, scale);
  EXPECT_EQ(scale.to_doubles()[0], 14.5);
  amax_scale(Tensor::zeros({4}, DType::f32), 3.0f, 0.25f, scale);
  EXPECT_EQ(scale.to_doubles()[0], 0.75);
  amax_scale(Tensor::from_doubles(std::vector<double>{1.0, NAN}, {2}, DType::f32), 2.0f, 1e-12f, scale);
  EXPECT_TRUE(std::isnan(scale.to_doubles()[0]));
  Tensor two = Tensor::empty({2}, DType::f32);
  EXPECT_THROW(amax_scale(Tensor::zeros({4}, DType::f32), 1.0f, 0.0f, two), Error);  // the scale is f32 [1]
}

TEST(Fp8Tensor, GemmEqualsDequantizedProductTimesScales) {
  Tensor a = random_tensor({5, 16}, DType::f32, 1, 3.0), b = random_tensor({16, 4}, DType::f32, 2, 3.0);
  Tensor a8 = Tensor::empty({5, 16}, DType::e4m3), b8 = Tensor::empty({16, 4}, DType::e4m3);
  const Tensor sa = scale_tensor(0.25f), sb = scale_tensor(0.125f);
  quantize_fp8(a, sa, a8);
  quantize_fp8(b, sb, b8);
  Tensor ad = Tensor::empty({5, 16}, DType::f64), bd = Tensor::empty({16, 4}, DType::f64);
  dequantize_fp8(a8, sa, ad);
  dequantize_fp8(b8, sb, bd);
  Tensor ref = Tensor::empty({5, 4}, DType::f64);
  gemm(ad, bd, ref);
  Tensor c = Tensor::empty({5, 4}, DType::f32);
  fp8_gemm(a8, b8, sa, sb, c);
  EXPECT_LT(testing::max_relative_error(c.to_doubles(), ref.to_doubles()), 1e-6);
  // Quantization error of the inputs themselves stays within e4m3 precision (2^-4 relative per element).
  Tensor exact = Tensor::empty({5, 4}, DType::f32);
  gemm(a, b, exact);
  EXPECT_LT(testing::max_relative_error(c.to_doubles(), exact.to_doubles()), 0.1);
  Tensor cb = Tensor::empty({5, 4}, DType::bf16);
  fp8_gemm(a8, b8, sa, sb, cb);
  const auto cv = c.to_doubles(), cbv = cb.to_doubles();
  for (size_t i = 0; i < cv.size(); ++i) EXPECT_EQ(cbv[i], round_bf16(static_cast<float>(cv[i])));
}

TEST(Fp8Tensor, ReluSquareQuantizeIsReluSquareThenQuantizeThenAmax) {
  const std::vector<float> values = {-3.0f, -0.0f, 0.5f, 2.0f, 25.0f, 40.0f};
  const Tensor pre = Tensor::from_floats(values, {2, 3}, DType::bf16);
  const Tensor scale = scale_tensor(2.0f);
  Tensor post = Tensor::empty({2, 3}, DType::bf16), q = Tensor::empty({2, 3}, DType::e4m3);
  Tensor post_max = Tensor::empty({1}, DType::f32);
  relu_square_quantize_fp8(pre, scale, post, q, post_max);
  // 25² = 625 is stored as bf16 624 (steps of 4 in [512, 1024)); 40² = 1600 is exact.
  EXPECT_EQ(post.to_doubles(), (std::vector<double>{0.0, 0.0, 0.25, 4.0, 624.0, 1600.0}));
  // post / 2 = 0, 0, 0.125, 2, 312 (e4m3 steps by 32 in [256, 512): rounds to 320), 800 (saturates to 448).
  Tensor back = Tensor::empty({2, 3}, DType::f32);
  dequantize_fp8(q, scale_tensor(1.0f), back);
  const std::vector<double> expected = {0.0, 0.0, 0.125, 2.0, 320.0, 448.0};
  EXPECT_EQ(back.to_doubles(), expected);
  EXPECT_EQ(post_max.to_floats()[0], 1600.0f);
}

TEST(Fp8Tensor, ReluSquareQuantizeNamesTheBadArgument) {
  const Tensor pre = Tensor::zeros({4}, DType::bf16);
  Tensor post32 = Tensor::empty({4}, DType::f32), q = Tensor::empty({4}, DType::e4m3);
  Tensor m = Tensor::empty({1}, DType::f32);
  try {
    relu_square_quantize_fp8(pre, scale_tensor(1.0f), post32, q, m);
    FAIL() << "expected an error for post's dtype";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("post must have pre's dtype"), std::string::npos) << e.what();
  }
  Tensor post = Tensor::empty({4}, DType::bf16), q_bf16 = Tensor::empty({4}, DType::bf16);
  EXPECT_THROW(relu_square_quantize_fp8(pre, scale_tensor(1.0f), post, q_bf16, m), Error);
}

TEST(Fp8Tensor, RejectsWrongDtypes) {
  Tensor x = Tensor::zeros({2}, DType::f32);
  Tensor q = Tensor::empty({2}, DType::bf16);
  EXPECT_THROW(quantize_fp8(x, scale_tensor(1.0f), q), Error);
  Tensor g = Tensor::empty({2, 2}, DType::e5m2);
  Tensor c = Tensor::empty({2, 2}, DType::f32);
  EXPECT_THROW(fp8_gemm(g, g, scale_tensor(1.0f), scale_tensor(1.0f), c), Error);
}

}  // namespace
}  // namespace gpt
