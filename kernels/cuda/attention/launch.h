#pragma once
// Host-side checks and launch helpers shared by the CUDA attention kernels.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <memory>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/tensor.h"

namespace gpt::cuda {

struct AttentionProblem {
  int64_t tokens;
  int heads;
  int r;  // cu_seqlens entries
};

// The CUDA kernels cover the model's case only: bf16, head dim 128 (kernels/attention.h allows more on the CPU).
inline AttentionProblem attention_problem(const Tensor& q, const Tensor& cu_seqlens, const char* op) {
  GPT_CHECK(q.dtype() == DType::bf16, op, ": the CUDA kernel takes bf16 only, got ", q.describe());
  GPT_CHECK(q.size(2) == 128, op, ": the CUDA kernel takes head dim 128 only, got ", q.describe());
  GPT_CHECK(q.size(0) < (int64_t{1} << 31), op, ": more than 2^31 tokens: ", q.describe());
  return {q.size(0), static_cast<int>(q.size(1)), static_cast<int>(cu_seqlens.size(0))};
}

// Raises a kernel's dynamic shared-memory limit to `bytes` (beyond the 48 KB default), or fails naming the op.
template <typename Kernel>
void set_smem_limit(Kernel kernel, size_t bytes, const char* op) {
  const size_t limit = device_properties().sharedMemPerBlockOptin;
  GPT_CHECK(bytes <= limit, op, ": needs ", bytes, " bytes of shared memory per block, the device allows ", limit,
            " (too many cu_seqlens entries?)");
  GPT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// Stream-ordered f32 scratch (cudaMallocAsync / cudaFreeAsync on the stream that uses it).
struct StreamFree {
  cudaStream_t stream;
  void operator()(float* p) const noexcept { cudaFreeAsync(p, stream); }
};
using AttentionScratch = std::unique_ptr<float, StreamFree>;

// D[h, t] = ⟨dy_th, y_th⟩ in f32, head-major [H, T], on the current stream (step 1 of every backward version).
AttentionScratch attention_row_dot(const Tensor& dy, const Tensor& y, const AttentionProblem& p);

inline __nv_bfloat16* device_bf16(const Tensor& t) {
  GPT_CHECK(t.device() == Device::cuda && t.dtype() == DType::bf16, "expected a bf16 CUDA tensor, got ", t.describe());
  return static_cast<__nv_bfloat16*>(const_cast<void*>(t.raw()));
}

inline int* device_i32(const Tensor& t) {
  GPT_CHECK(t.device() == Device::cuda && t.dtype() == DType::i32, "expected an i32 CUDA tensor, got ", t.describe());
  return static_cast<int*>(const_cast<void*>(t.raw()));
}

}  // namespace gpt::cuda
