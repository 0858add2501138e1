#pragma once
// Numbered versions of the CUDA mix_forward and mix_backward (kernels/elementwise.h): cuda::mix_forward runs
// kPromotedMixForward, cuda::mix_backward kPromotedMixBackward;
// the GPU tests check every version against the CPU reference and ops_a_cuda_bench times them side by side. What
// each version does is written beside its kernel in kernels/cuda/elementwise.cu.
// mix_backward:
//   v1: one warp per row; per term, the coefficient gradients (a dot product and a warp reduction per lane group)
//       and then dx pack by pack.
//   v2: one warp per row with the row's dout held in registers; per term, every x and dx pack of the row loaded at
//       once, the lane groups reduced by segmented shuffles, dx written from the registers. Rows of at most four
//       packs per lane and lane groups that tile the warp; otherwise v1. In the `head` step (one H100, proxy
//       batches) v2 was 2.3-3.2% slower than v1 at every stage: not promoted.
//   v3: one warp per row, for rows whose terms all have one coefficient per row (ungrouped lanes, at most five
//       terms, packed bf16): coefficients formed once per row, all terms of a pack loaded together, v1's
//       arithmetic (bit-identical results); other calls run v1. Promoted: with mix_forward v2, the `head` step (one
//       H100, proxy batches, stages 0/1/2) took 247.5 / 473.4 / 699.4 ms against v1's 250.1 / 478.6 / 704.5 and
//       249.1 / 477.5 / 706.7 in the same call, the same losses.
//   v4: v3 with its registers capped at 64 (4 blocks of 8 warps per SM instead of 2; spills): 253.5 / 483.0 /
//       717.2 ms in that call, slower than v1.
// mix_forward:
//   v1: one warp per row; per pack, every term's coefficient formed again and its x loaded one term at a time.
//   v2: like mix_backward v3 (the same calls qualify, the rest run v1): coefficients once per row, all terms of a
//       pack loaded together; bit-identical to v1. Promoted: in the call of mix_backward v3 (above) the step's
//       forward phase took 79.9 / 152.3 / 224.1 ms (stages 0/1/2) against v1's 80.4 / 154.9 / 227.0 and 80.1 / 154.1
//       / 227.9 (the backward version does not enter the forward phase).
// mix_rmsnorm_forward (kernels/elementwise.h) runs mix_forward v2's kernel with the norm of each row added, on the
// calls v2 takes while v2 is the mix_forward in use; other calls run mix_forward and rmsnorm_forward.
// mix_rmsnorm_backward (kernels/elementwise.h) runs mix_backward v3's kernel with dout formed from the norm's
// gradient in its registers (kernels/cuda/mix_norm_backward.cu), on the calls v3 takes while v3 is the
// mix_backward in use (and whose dx are neither dy nor x); other calls run rmsnorm_backward into a temporary and
// mix_backward.
#include <span>

#include "kernels/elementwise.h"

namespace gpt::cuda {

inline constexpr int kPromotedMixBackward = 3;
inline constexpr int kMixBackwardVersions = 4;
inline constexpr int kPromotedMixForward = 2;
inline constexpr int kMixForwardVersions = 2;

// mix_backward through version 1 … kMixBackwardVersions. cuda::mix_backward runs kPromotedMixBackward, or the
// version that SPEEDRUN_MIX_BACKWARD names ("v3"; read once per process).
void mix_backward_version(const Tensor& dout, std::span<const MixTerm> terms, std::span<const MixGrad> grads,
                          int version);
// The version cuda::mix_backward runs (kPromotedMixBackward or SPEEDRUN_MIX_BACKWARD's).
int mix_backward_in_use();
// mix_forward through version 1 … kMixForwardVersions; cuda::mix_forward runs kPromotedMixForward or the version
// SPEEDRUN_MIX_FORWARD names.
void mix_forward_version(std::span<const MixTerm> terms, Tensor& out, int version);
// The term count with which mix_forward v2 (grads empty) or mix_backward v3/v4 (grads given; out is dout) would take
// the call, 0 when it goes to v1: for tests that must know the one-pass kernel ran.
int mix_row_terms(std::span<const MixTerm> terms, std::span<const MixGrad> grads, const Tensor& out);

}  // namespace gpt::cuda
