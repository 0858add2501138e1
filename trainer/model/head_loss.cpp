// RECIPE §3: the training loss (MTP + prefix, fused softcap gradient, optional §7.1 FP8 lm_head) and the chunked
// validation loss (masked by the §S.6 canonical mask when the step config carries one).
#include "kernels/fp8_linear.h"
#include "kernels/gemm.h"
#include "kernels/masked_validation_loss.h"
#include "kernels/softcap_loss.h"
#include "trainer/model/model_forward.h"

namespace gpt::model_detail {

double training_loss(Forward& f, Var h) {
  const StepConfig& c = f.config;
  Var lm_head = f.p.lm_head;
  const Tensor& hv = h.value();
  const int64_t tokens = hv.size(0), d = hv.size(1), vocab = lm_head.value().size(1);
  TrainLossConfig loss_config{.mtp_weights = c.mtp_weights,
                              .prefix_weight = c.prefix_weight,
                              .loss_scale = 1.0f / static_cast<float>(c.accumulation_steps)};
  Tensor loss = Tensor::empty({1}, stat_dtype(hv.dtype()), hv.device());
  if (c.fp8_lm_head) {
    LmHeadFp8Scales scales = LmHeadFp8Scales::make(c.accumulation_steps, hv.device());
    Tensor x8 = Tensor::empty({tokens, d}, DType::e4m3, hv.device());
    Tensor w8 = Tensor::empty({d, vocab}, DType::e4m3, hv.device());
    Tensor z_raw = Tensor::empty({tokens, vocab}, hv.dtype(), hv.device());
    lm_head_fp8_forward(hv, lm_head.value(), scales, x8, w8, z_raw);
    Tensor g8 = Tensor::empty({tokens, vocab}, DType::e5m2, hv.device());
    loss_config.grad_scale = scales.grad_scale_value();
    softcap_train_loss(z_raw, f.batch.targets, c.prefix_table, loss_config, loss, g8);
    f.tape.push([h, lm_head, g8, x8, w8, scales]() mutable {
      lm_head_fp8_backward(g8, x8, w8, scales, h.grad(), lm_head.grad());
    }, "lm_head_fp8_loss", {Var{}, h, lm_head});
  } else {
    Tensor z_raw = Tensor::empty({tokens, vocab}, hv.dtype(), hv.device());
    gemm(hv, lm_head.value(), z_raw);
    Tensor dz = Tensor::empty({tokens, vocab}, hv.dtype(), hv.device());
    softcap_train_loss(z_raw, f.batch.targets, c.prefix_table, loss_config, loss, dz);
    f.tape.push([h, lm_head, dz]() mutable {
      gemm(dz, lm_head.value(), h.grad(), {.trans_b = true, .beta = 1.0f});
      gemm(h.value(), dz, lm_head.grad(), {.trans_a = true, .beta = 1.0f});
    }, "lm_head_loss", {Var{}, h, lm_head});
  }
  return loss.to_doubles()[0];
}

double validation_loss_sum(Forward& f, Var h) {
  Tensor sum = Tensor::empty({1}, stat_dtype(h.value().dtype()), h.value().device());
  if (f.config.canonical_mask.defined()) {  // §S.6: the final validation of a run with the canonical mask
    masked_validation_loss(h.value(), f.p.lm_head.value(), f.batch.inputs, f.batch.targets, f.config.canonical_mask,
                           f.config.validation_chunk_rows, sum);
    return sum.to_doubles()[0];
  }
  validation_loss(h.value(), f.p.lm_head.value(), f.batch.targets, f.config.validation_chunk_rows, sum);
  return sum.to_doubles()[0];
}

}  // namespace gpt::model_detail
