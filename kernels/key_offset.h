#pragma once
// Partial key offset (RECIPE §2.9 step 5, layers 3 and 10): the upper half of every key is taken from the
// previous token. For k, y: [T, H, D] (one floating dtype, D even):
//   y_t[:, 0:D/2] = k_t[:, 0:D/2],   y_t[:, D/2:D] = k_{t−1}[:, D/2:D] for t >= 1,   y_0 = k_0.
// The shift ignores document boundaries (cu_seqlens) on purpose. Values are copied exactly.
// Backward: dk_t[:, 0:D/2] += dy_t[:, 0:D/2]; dk_t[:, D/2:D] += dy_{t+1}[:, D/2:D] (t < T−1), and
// dk_0[:, D/2:D] additionally += dy_0[:, D/2:D] (k_0's upper half is used at positions 0 and 1). With
// GradWrite::overwrite dk is written with those sums instead (kernels/grad_write.h).
#include "kernels/grad_write.h"
#include "kernels/tensor.h"

namespace gpt {

// y must not alias k (the shift reads the previous token after writing the current one would clobber it).
void key_offset_forward(const Tensor& k, Tensor& y);
// dk += J^T dy. dy, dk: [T, H, D], same dtype.
void key_offset_backward(const Tensor& dy, Tensor& dk, GradWrite write = GradWrite::add);

namespace cpu {
void key_offset_forward(const Tensor& k, Tensor& y);
void key_offset_backward(const Tensor& dy, Tensor& dk, GradWrite write);
}  // namespace cpu
namespace cuda {
void key_offset_forward(const Tensor& k, Tensor& y);
void key_offset_backward(const Tensor& dy, Tensor& dk, GradWrite write);
}  // namespace cuda

}  // namespace gpt
