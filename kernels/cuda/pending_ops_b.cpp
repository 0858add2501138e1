// CUDA entry points of the optimizer op families (kernels/adam.h, kernels/normuon.h) that have no GPU kernel
// yet. Each one fails loudly instead of leaving the CUDA build with undefined symbols; delete a function here
// when its kernel lands in kernels/cuda/<op>.cu.
#include "kernels/adam.h"
#include "kernels/normuon.h"

namespace gpt::cuda {

namespace {
[[noreturn]] void no_kernel(const char* op) {
  GPT_FAIL(op, ": no CUDA kernel yet; run it on CPU tensors (the CPU reference) or implement kernels/cuda/");
}
}  // namespace

void adam_update(Tensor&, const Tensor&, Tensor&, Tensor&, const AdamCoefficients&) { no_kernel("adam_update"); }

void normuon_momentum(const Tensor&, Tensor&, Tensor&, double) { no_kernel("normuon_momentum"); }
void normuon_normalize(Tensor&) { no_kernel("normuon_normalize"); }
void normuon_apply(const Tensor&, Tensor&, Tensor&, Tensor&, const NorMuonArgs&) { no_kernel("normuon_apply"); }

}  // namespace gpt::cuda
