// CUDA entry points of the attention op family (kernels/attention.h) that have no GPU kernel yet. Each one fails loudly
// instead of leaving the CUDA build with undefined symbols; delete a function here when its kernel lands
// in kernels/cuda/<op>.cu.
#include "kernels/attention.h"

namespace gpt::cuda {

namespace {
[[noreturn]] void no_kernel(const char* op) {
  GPT_FAIL(op, ": no CUDA kernel yet; run it on CPU tensors (the CPU reference) or implement kernels/cuda/");
}
}  // namespace


}  // namespace gpt::cuda
