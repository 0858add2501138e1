#pragma once
// Numbered versions of the CUDA row gather behind embedding_forward, value_embedding_forward and bigram_forward
// (kernels/embedding.h, kernels/bigram.h): the public ops run kPromotedGather; the GPU tests check every version
// against the CPU reference exactly and ops_a_cuda_bench times them side by side. What each version does is
// written beside its kernel in kernels/cuda/embedding.cu.
#include "kernels/tensor.h"

namespace gpt::cuda {

inline constexpr int kPromotedGather = 2;
inline constexpr int kGatherVersions = 2;

// embedding_forward through gather version 1 or 2.
void embedding_forward_version(const Tensor& table, const Tensor& ids, Tensor& out, int version);

}  // namespace gpt::cuda
