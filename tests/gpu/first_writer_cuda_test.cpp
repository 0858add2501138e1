// The first-writer block of tests/common/first_writer_block.h on the GPU (bf16, head dim 128: the CUDA attention's
// case): every CUDA overwrite path — QK-norm + rotary, key offset, value gate, attention (the promoted backward
// version, or SPEEDRUN_ATTENTION_BACKWARD's), XSA, head gate, the GEMMs with beta 0 — gives the bits of adding into
// zeros.
#include <gtest/gtest.h>

#include "tests/common/first_writer_block.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt {
namespace {

using namespace first_writer;

TEST(FirstWritersCuda, OverwritingGivesTheGradientsOfAddingIntoZeros) {
  GPT_REQUIRE_CUDA();
  const BlockShape shape{700, 2, 128, 200, {0, 130, 130, 451, 700}};
  const BlockInputs in = make_inputs(shape, DType::bf16, Device::cuda);
  // A first pass settles the GEMM plans: the first beta-0 call of a shape autotunes it, and a shape first run with
  // beta 1 would otherwise change algorithm (and summation order) between the two compared passes.
  run_block(in, /*all_add=*/false);
  expect_same_gradients(run_block(in, /*all_add=*/false), run_block(in, /*all_add=*/true));
}

}  // namespace
}  // namespace gpt
