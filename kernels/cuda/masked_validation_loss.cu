// CUDA kernel of kernels/masked_validation_loss.h (RECIPE §S.6): the validation row losses of
// kernels/cuda/validation_rows.cuh with the canonical mask applied, so an all-zero mask gives the CUDA unmasked loss
// bit for bit. Against the CPU reference (a running max instead of the fixed shift 23, another summation order, the
// host's exp and log) the per-row losses agree to a few fp32 ulp; the rows are then added in double in row order on
// both backends.
#include "kernels/cuda/validation_rows.cuh"
#include "kernels/masked_validation_loss.h"

namespace gpt::cuda {

void masked_validation_loss_rows_add(const Tensor& z_raw, const Tensor& inputs, const Tensor& targets,
                                     const Tensor& mask, Tensor& loss_sum) {
  const int64_t rows = z_raw.size(0), vocab = z_raw.size(1);
  if (rows == 0) return;
  const CanonicalMaskRows mask_rows{.bits = device_ptr<uint8_t>(mask),
                                    .inputs = device_ptr<int32_t>(inputs),
                                    .mask_rows = mask.size(0),
                                    .row_bytes = mask.size(1)};
  DeviceScratch row_loss(static_cast<size_t>(rows) * sizeof(double));
  dispatch_floating_cuda(z_raw.dtype(), "masked_validation_loss", [&]<typename T, typename A>() {
    launch_validation_rows<T, A, true>(device_ptr<T>(z_raw), device_ptr<int64_t>(targets), rows, vocab, mask_rows,
                                       row_loss.as<double>(), op_stream());
    sum_rows_kernel<A><<<1, 1024, 0, op_stream()>>>(row_loss.as<double>(), rows, 1, 1.0, true, device_ptr<A>(loss_sum));
    GPT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpt::cuda
