#pragma once
// Numbered versions of the CUDA row gather behind embedding_forward, value_embedding_forward and bigram_forward, and
// of the scatter-add behind embedding_backward, value_embedding_backward and bigram_backward (kernels/embedding.h,
// kernels/bigram.h). The public ops run kPromotedGather and kPromotedScatter (or the scatter that
// SPEEDRUN_SCATTER_ROWS names, "v1" or "v2", read once per process); the GPU tests check every version against the
// CPU reference and ops_a_cuda_bench times them side by side. What each version does is written beside its kernel
// in kernels/cuda/embedding.cu.
//   scatter v1: one block per run of equal ids in sorted order, the run summed serially in token order: the CPU
//               reference's bits, but a run of thousands of tokens (BOS, ",", " the") holds the whole grid.
//   scatter v2 (promoted): chunks of 32 sorted positions per block, runs that cross a chunk boundary summed in
//               pieces and combined in chunk order by a second kernel (kernels/cuda/scatter_plan.h): reproducible
//               run to run; rows whose run fits in one chunk get v1's bits, the others differ by the rounding of
//               the pieces. In the `head` step on loader batches it took 4.2-4.8% off every stage (one H100).
#include "kernels/tensor.h"

namespace gpt::cuda {

inline constexpr int kPromotedGather = 2;
inline constexpr int kGatherVersions = 2;

inline constexpr int kPromotedScatter = 2;
inline constexpr int kScatterVersions = 2;

// embedding_forward through gather version 1 or 2.
void embedding_forward_version(const Tensor& table, const Tensor& ids, Tensor& out, int version);

// embedding_backward / bigram_backward (CUDA tensors, arguments as the public ops) through scatter version 1 or 2.
void embedding_backward_version(const Tensor& dout, const Tensor& ids, Tensor& dtable, int version);
void bigram_backward_version(const Tensor& dout, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids,
                             Tensor& dembed, int version);

}  // namespace gpt::cuda
