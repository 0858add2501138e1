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

void attention_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, int64_t, float) {
  no_kernel("attention_forward");
}
void attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&, Tensor&, Tensor&, Tensor&, int64_t, float) {
  no_kernel("attention_backward");
}
void double_cu_seqlens(const Tensor&, Tensor&) { no_kernel("double_cu_seqlens"); }

}  // namespace gpt::cuda
