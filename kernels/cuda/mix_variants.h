#pragma once
// Numbered versions of the CUDA mix_backward (kernels/elementwise.h): cuda::mix_backward runs kPromotedMixBackward;
// the GPU tests check every version against the CPU reference and ops_a_cuda_bench times them side by side. What
// each version does is written beside its kernel in kernels/cuda/elementwise.cu.
//   v1: one warp per row; per term, the coefficient gradients (a dot product and a warp reduction per lane group)
//       and then dx pack by pack.
//   v2: one warp per row with the row's dout held in registers; per term, every x and dx pack of the row loaded at
//       once, the lane groups reduced by segmented shuffles, dx written from the registers. Rows of at most four
//       packs per lane and lane groups that tile the warp; otherwise v1. In the `head` step (one H100, proxy
//       batches) v2 was 2.3-3.2% slower than v1 at every stage: not promoted.
#include <span>

#include "kernels/elementwise.h"

namespace gpt::cuda {

inline constexpr int kPromotedMixBackward = 1;
inline constexpr int kMixBackwardVersions = 2;

// mix_backward through version 1 or 2. cuda::mix_backward runs kPromotedMixBackward, or the version that
// SPEEDRUN_MIX_BACKWARD names ("v2"; read once per process).
void mix_backward_version(const Tensor& dout, std::span<const MixTerm> terms, std::span<const MixGrad> grads,
                          int version);

}  // namespace gpt::cuda
