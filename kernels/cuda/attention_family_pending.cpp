// CUDA entry points of the attention op family (kernels/attention.h, rotary.h, key_offset.h,
// value_gate.h, xsa.h, dc_attention.h, head_gate.h) that have no GPU kernel yet. Each one fails loudly
// instead of leaving the CUDA build with undefined symbols; delete a function here when its kernel lands
// in kernels/cuda/<op>.cu.
#include "kernels/attention.h"
#include "kernels/dc_attention.h"
#include "kernels/head_gate.h"
#include "kernels/value_gate.h"
#include "kernels/xsa.h"

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

void value_gate_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) {
  no_kernel("value_gate_forward");
}
void value_gate_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&,
                         Tensor&) {
  no_kernel("value_gate_backward");
}

void xsa_forward(const Tensor&, const Tensor&, const Tensor&, int64_t, Tensor&) { no_kernel("xsa_forward"); }
void xsa_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, Tensor&, Tensor&, Tensor&) {
  no_kernel("xsa_backward");
}

void dc_attention_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, DcLanes,
                          const Tensor&, Tensor&, Tensor&, float, int64_t) {
  no_kernel("dc_attention_forward");
}
void dc_attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           DcLanes, const Tensor&, Tensor&, Tensor&, Tensor&, Tensor&, float, int64_t) {
  no_kernel("dc_attention_backward");
}

void head_gate_forward(const Tensor&, const Tensor&, int64_t, Tensor&) { no_kernel("head_gate_forward"); }
void head_gate_backward(const Tensor&, const Tensor&, const Tensor&, int64_t, Tensor&, Tensor&) {
  no_kernel("head_gate_backward");
}

}  // namespace gpt::cuda
