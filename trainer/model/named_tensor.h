#pragma once
// A tensor handle with a stable name, as state lists, checkpoints and the warmup reset see it.
#include <string>

#include "kernels/tensor.h"

namespace gpt {

// The handle shares storage with the owner's own tensor.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

}  // namespace gpt
