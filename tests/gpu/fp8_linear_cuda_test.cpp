// The §7 FP8 weight copies (kernels/fp8_linear.h) on the GPU: the forward from copies made once per optimizer step
// gives the bits of quantizing the weights in every forward, at shapes the tensor-core FP8 GEMM takes.
#include <gtest/gtest.h>

#include "kernels/fp8_linear.h"
#include "tests/common/gradcheck.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using gpu_testing::bit_mismatches;
using testing::random_tensor;

TEST(Fp8LinearCuda, LmHeadForwardFromTheCopyGivesTheBitsOfQuantizingPerCall) {
  GPT_REQUIRE_CUDA_DEVICE();
  const int64_t rows = 256, d = 768, vocab = 50304;
  const Tensor h = gpu(random_tensor({rows, d}, DType::bf16, 1));
  const Tensor w = gpu(random_tensor({d, vocab}, DType::bf16, 2, 0.005));
  const LmHeadFp8Scales s = LmHeadFp8Scales::make(8, Device::cuda);
  Tensor x8 = Tensor::empty({rows, d}, DType::e4m3, Device::cuda);
  Tensor w8 = Tensor::empty({d, vocab}, DType::e4m3, Device::cuda);
  Tensor z = Tensor::empty({rows, vocab}, DType::bf16, Device::cuda);
  lm_head_fp8_forward(h, w, s, x8, w8, z);
  const LmHeadFp8Copy copy = lm_head_fp8_copy(w, s);
  Tensor x8_copy = Tensor::empty({rows, d}, DType::e4m3, Device::cuda);
  Tensor z_copy = Tensor::empty({rows, vocab}, DType::bf16, Device::cuda);
  lm_head_fp8_forward(h, copy, s, x8_copy, z_copy);
  EXPECT_EQ(bit_mismatches(copy.w8, w8), 0);
  EXPECT_EQ(bit_mismatches(x8_copy, x8), 0);
  EXPECT_EQ(bit_mismatches(z_copy, z), 0);
}

TEST(Fp8LinearCuda, MlpForwardFromWeightCopiesGivesTheBitsOfQuantizingPerCall) {
  GPT_REQUIRE_CUDA_DEVICE();
  const int64_t rows = 512, d = 768, hidden = 3072;
  const Tensor u = gpu(random_tensor({rows, d}, DType::bf16, 3));
  const Tensor w1 = gpu(random_tensor({hidden, d}, DType::bf16, 4, 0.05));
  const Tensor w2 = gpu(random_tensor({hidden, d}, DType::bf16, 5, 0.05));
  MlpFp8State per_call = MlpFp8State::make(Device::cuda), copied = MlpFp8State::make(Device::cuda);
  mlp_fp8_refresh_w2_scale(w2, true, per_call);
  mlp_fp8_refresh_w2_scale(w2, true, copied);
  const MlpFp8Weights copies = mlp_fp8_weights(w1, w2, copied);
  for (int pass = 0; pass < 2; ++pass) {  // the second pass runs on the delayed activation scale
    auto empty = [](int64_t r, int64_t c) { return Tensor::empty({r, c}, DType::bf16, Device::cuda); };
    Tensor pre = empty(rows, hidden), post = empty(rows, hidden), out = empty(rows, d);
    Tensor pre_c = empty(rows, hidden), post_c = empty(rows, hidden), out_c = empty(rows, d);
    mlp_fp8_forward(u, w1, w2, per_call, pre, post, out);
    mlp_fp8_forward(u, copies, copied, pre_c, post_c, out_c);
    EXPECT_EQ(bit_mismatches(pre_c, pre), 0) << "pass " << pass;
    EXPECT_EQ(bit_mismatches(post_c, post), 0) << "pass " << pass;
    EXPECT_EQ(bit_mismatches(out_c, out), 0) << "pass " << pass;
    EXPECT_EQ(bit_mismatches(copied.act_scale, per_call.act_scale), 0) << "pass " << pass;
  }
}

}  // namespace
}  // namespace gpt
