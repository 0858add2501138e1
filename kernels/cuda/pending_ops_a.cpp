// CUDA entry points of the embedding, elementwise, smear, bigram, activation, softcap-loss, fp8 and transpose op
// families that have no GPU kernel yet. Each one fails loudly instead of leaving the CUDA build with undefined
// symbols; a function is deleted here when its kernel lands in kernels/cuda/<op>.cu.
#include "kernels/activation.h"
#include "kernels/bigram.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/fp8.h"
#include "kernels/smear.h"
#include "kernels/softcap_loss.h"
#include "kernels/transpose.h"

namespace gpt::cuda {

namespace {
[[noreturn]] void not_written(const char* op) { GPT_FAIL(op, ": CUDA kernel not written yet"); }
}  // namespace

void embedding_forward(const Tensor&, const Tensor&, Tensor&) { not_written("embedding_forward"); }
void embedding_backward(const Tensor&, const Tensor&, Tensor&) { not_written("embedding_backward"); }

void mix_forward(std::span<const MixTerm>, Tensor&) { not_written("mix_forward"); }
void mix_backward(const Tensor&, std::span<const MixTerm>, std::span<const MixGrad>) { not_written("mix_backward"); }

void smear_forward(const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&) { not_written("smear_forward"); }
void smear_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&,
                    Tensor&) {
  not_written("smear_backward");
}

void bigram_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) {
  not_written("bigram_forward");
}
void bigram_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) {
  not_written("bigram_backward");
}

void gelu_forward(const Tensor&, Tensor&) { not_written("gelu_forward"); }
void gelu_backward(const Tensor&, const Tensor&, Tensor&) { not_written("gelu_backward"); }
void relu_square_forward(const Tensor&, Tensor&) { not_written("relu_square_forward"); }
void relu_square_backward(const Tensor&, const Tensor&, Tensor&) { not_written("relu_square_backward"); }
void bias_add_forward(const Tensor&, const Tensor&, Tensor&) { not_written("bias_add_forward"); }
void bias_backward(const Tensor&, Tensor&) { not_written("bias_backward"); }

void softcap_train_loss(const Tensor&, const Tensor&, const Tensor&, const TrainLossConfig&, Tensor&, Tensor&) {
  not_written("softcap_train_loss");
}
void validation_loss_rows_add(const Tensor&, const Tensor&, Tensor&) { not_written("validation_loss_rows_add"); }

void quantize_fp8(const Tensor&, const Tensor&, Tensor&) { not_written("quantize_fp8"); }
void dequantize_fp8(const Tensor&, const Tensor&, Tensor&) { not_written("dequantize_fp8"); }
void amax(const Tensor&, Tensor&) { not_written("amax"); }
void scale_from_amax(const Tensor&, float, float, Tensor&) { not_written("scale_from_amax"); }
void fp8_gemm(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, const GemmArgs&) {
  not_written("fp8_gemm");
}

void transpose(const Tensor&, Tensor&) { not_written("transpose"); }
void add_transposed(const Tensor&, Tensor&) { not_written("add_transposed"); }

}  // namespace gpt::cuda
