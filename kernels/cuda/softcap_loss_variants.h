#pragma once
// Numbered versions of the CUDA softcapped training loss (kernels/softcap_loss.h). cuda::softcap_train_loss runs v2
// where it applies (softcap_train_v2_supports) and v1 otherwise; the GPU tests check both against the CPU reference
// and ops_a_cuda_bench times them side by side.
//   v1: one 1024-thread block per row, two sweeps over the row (the second from L2), the sigmoid and the exponential
//       evaluated in both sweeps, one thread rewrites the target columns after a barrier. Every dtype and vocab.
//   v2: one 512-thread block per row, two blocks per SM at V = 50,304 bf16; the row is read from global memory once
//       and its s (rounded to the logits' dtype) is kept in shared memory for the gradient sweep, so the sigmoid runs
//       once per element; each target column is rewritten by the thread that owns its pack, without a barrier.
//       Needs V a multiple of 16 bytes' worth of elements, 16-byte aligned z_raw / dz_raw, and V·sizeof(T) bytes
//       of shared memory per block (bf16 up to V ≈ 116k on an H200).
#include "kernels/softcap_loss.h"
#include "kernels/tensor.h"

namespace gpt::cuda {

bool softcap_train_v2_supports(const Tensor& z_raw, const Tensor& dz_raw);

void softcap_train_loss_v1(const Tensor& z_raw, const Tensor& targets, const Tensor& prefix_table,
                           const TrainLossConfig& config, Tensor& loss, Tensor& dz_raw);
void softcap_train_loss_v2(const Tensor& z_raw, const Tensor& targets, const Tensor& prefix_table,
                           const TrainLossConfig& config, Tensor& loss, Tensor& dz_raw);

}  // namespace gpt::cuda
