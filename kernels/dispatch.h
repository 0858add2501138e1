#pragma once
// Routes an op call to its CPU reference or its CUDA kernel by the device of the tensors.
#include "kernels/tensor.h"

#ifdef SPEEDRUN_HAVE_CUDA
#define GPT_BACKEND_CALL(device, fn, ...)  \
  do {                                     \
    if ((device) == ::gpt::Device::cuda) { \
      ::gpt::cuda::fn(__VA_ARGS__);        \
    } else {                               \
      ::gpt::cpu::fn(__VA_ARGS__);         \
    }                                      \
  } while (0)
#else
#define GPT_BACKEND_CALL(device, fn, ...)                                                   \
  do {                                                                                      \
    GPT_CHECK((device) == ::gpt::Device::cpu, #fn ": CUDA tensor in a build without CUDA"); \
    ::gpt::cpu::fn(__VA_ARGS__);                                                            \
  } while (0)
#endif
