#pragma once
// CUDA error checking: every runtime call and every launch is checked, failures become gpt::Error.
#include <cuda_runtime.h>

#include "base/check.h"

#define GPT_CUDA_CHECK(expr)                                                                                     \
  do {                                                                                                           \
    cudaError_t gpt_cuda_err_ = (expr);                                                                          \
    if (gpt_cuda_err_ != cudaSuccess)                                                                            \
      GPT_FAIL("CUDA error ", cudaGetErrorName(gpt_cuda_err_), " (", cudaGetErrorString(gpt_cuda_err_), ") in ", \
               #expr);                                                                                           \
  } while (0)

// After a kernel launch: catches bad launch configurations immediately.
#define GPT_CUDA_CHECK_LAUNCH() GPT_CUDA_CHECK(cudaGetLastError())
