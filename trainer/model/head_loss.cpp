// RECIPE §3: the training loss (MTP + prefix, fused softcap gradient, optional §7.1 FP8 lm_head, optional §S.4
// sampled softmax) and the chunked validation loss (masked by the §S.6 canonical mask when the step config carries
// one).
#include "kernels/column_select.h"
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
  // §S.4 sampled softmax: the vocabulary becomes C. The logits read the columns C of lm_head (gathered into a
  // [d, P] copy), targets and prefix table are C's positions, and the [d, P] gradient is added into the columns
  // C of lm_head's dense gradient (its other columns get nothing from this microbatch).
  const SampledSoftmaxInputs& sampled = c.sampled_softmax;
  const bool is_sampled = sampled.active();
  Tensor weights = lm_head.value();
  if (is_sampled) {
    weights = Tensor::empty({lm_head.value().size(0), sampled.candidates.size(0)}, lm_head.value().dtype(),
                            lm_head.value().device());
    column_gather(lm_head.value(), sampled.candidates, weights);
  }
  const Tensor& targets = is_sampled ? sampled.targets : f.batch.targets;
  const Tensor& prefix_table = is_sampled ? sampled.prefix_table : c.prefix_table;
  const Tensor candidates = sampled.candidates;
  // Adds the [d, vocab] gradient of `weights` into lm_head's gradient; `write(dst)` adds it into dst.
  auto add_weight_gradient = [is_sampled, candidates](Var& head, const auto& write) {
    if (!is_sampled) {
      write(head.grad());
      return;
    }
    Tensor narrow = Tensor::zeros({head.grad().size(0), candidates.size(0)}, head.grad().dtype(), head.grad().device());
    write(narrow);
    column_scatter_add(narrow, candidates, head.grad());
  };
  const int64_t tokens = hv.size(0), d = hv.size(1), vocab = weights.size(1);
  TrainLossConfig loss_config{.mtp_weights = c.mtp_weights,
                              .prefix_weight = c.prefix_weight,
                              .loss_scale = 1.0f / static_cast<float>(c.accumulation_steps)};
  Tensor loss = Tensor::empty({1}, stat_dtype(hv.dtype()), hv.device());
  if (c.fp8_lm_head) {
    // The scales are static, so quantizing the gathered columns equals gathering the quantized lm_head (§S.4).
    const LmHeadFp8Scales scales = f.lm_head_fp8_scales != nullptr
                                       ? *f.lm_head_fp8_scales
                                       : LmHeadFp8Scales::make(c.accumulation_steps, hv.device());
    Tensor x8 = Tensor::empty({tokens, d}, DType::e4m3, hv.device());
    Tensor w8;
    Tensor z_raw = Tensor::empty({tokens, vocab}, hv.dtype(), hv.device());
    if (!is_sampled && f.lm_head_fp8 != nullptr && f.lm_head_fp8->defined()) {
      w8 = f.lm_head_fp8->w8;  // the copy of the last refresh (GptModel::refresh_fp8)
      lm_head_fp8_forward(hv, *f.lm_head_fp8, scales, x8, z_raw);
    } else {
      w8 = Tensor::empty({d, vocab}, DType::e4m3, hv.device());
      lm_head_fp8_forward(hv, weights, scales, x8, w8, z_raw);
    }
    Tensor g8 = Tensor::empty({tokens, vocab}, DType::e5m2, hv.device());
    loss_config.grad_scale = scales.grad_scale_value();
    softcap_train_loss(z_raw, targets, prefix_table, loss_config, loss, g8);
    f.tape.push(
        [h, lm_head, g8, x8, w8, scales, add_weight_gradient]() mutable {
          add_weight_gradient(lm_head, [&](Tensor& dw) { lm_head_fp8_backward(g8, x8, w8, scales, h.grad(), dw); });
        },
        "lm_head_fp8_loss", {Var{}, h, lm_head});
  } else {
    Tensor z_raw = Tensor::empty({tokens, vocab}, hv.dtype(), hv.device());
    gemm(hv, weights, z_raw);
    Tensor dz = Tensor::empty({tokens, vocab}, hv.dtype(), hv.device());
    softcap_train_loss(z_raw, targets, prefix_table, loss_config, loss, dz);
    f.tape.push(
        [h, lm_head, dz, weights, add_weight_gradient]() mutable {
          gemm(dz, weights, h.grad(), {.trans_b = true, .beta = 1.0f});
          add_weight_gradient(lm_head, [&](Tensor& dw) { gemm(h.value(), dz, dw, {.trans_a = true, .beta = 1.0f}); });
        },
        "lm_head_loss", {Var{}, h, lm_head});
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
