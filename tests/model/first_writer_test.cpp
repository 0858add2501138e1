// First writers of a gradient overwrite it (trainer/model/tape.h: Var::reshaped, grad_for_overwrite; the ops'
// GradWrite), checked on one attention block's taped ops (tests/common/first_writer_block.h) on the CPU.
#include <gtest/gtest.h>

#include "tests/common/first_writer_block.h"

namespace gpt {
namespace {

using namespace first_writer;

const BlockShape kShape{24, 6, 8, 9, {0, 7, 7, 19, 24}};

TEST(FirstWriters, ViewsAllocateNoGradientBeforeTheBackward) {
  bool early = true;
  run_block(make_inputs(kShape, DType::f32, Device::cpu), /*all_add=*/false, &early);
  EXPECT_FALSE(early);
}

TEST(FirstWriters, OverwritingGivesTheGradientsOfAddingIntoZeros) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const BlockInputs in = make_inputs(kShape, dtype, Device::cpu);
    expect_same_gradients(run_block(in, /*all_add=*/false), run_block(in, /*all_add=*/true));
  }
}

}  // namespace
}  // namespace gpt
