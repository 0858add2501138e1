// Device memory primitives behind kernels/tensor.h (declared there in namespace gpt::cuda).
#include "kernels/cuda/cuda_check.h"

namespace gpt::cuda {

void* malloc_device(size_t bytes) {
  void* p = nullptr;
  GPT_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}

void free_device(void* ptr) noexcept { cudaFree(ptr); }

void copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes) {
  cudaMemcpyKind kind = dst_on_device ? (src_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                      : (src_on_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  GPT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
}

void memset_zero(void* ptr, size_t bytes) { GPT_CUDA_CHECK(cudaMemset(ptr, 0, bytes)); }

bool available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace gpt::cuda
