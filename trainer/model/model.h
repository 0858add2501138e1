#pragma once
// The `head` model of RECIPE §2 and its losses (§3), written once against the ops of kernels/ (the backend is the
// tensors' device; nothing here branches on it).
//
// Usage per step: build a StepConfig from the schedule, then for each microbatch call train_forward_backward
// (gradients ADD into the ParameterSet's buffers; the model never zeroes them: the optimizer clears bank
// gradients every step and Adam gradients after odd steps, §4.1). validation_loss evaluates one window.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/fp8_linear.h"
#include "kernels/tensor.h"
#include "trainer/data/train_loader.h"
#include "trainer/model/candidate_sampler.h"
#include "trainer/model/ngram_table.h"
#include "trainer/model/tape.h"
#include "trainer/model/weights.h"
#include "trainer/model/parameter_set.h"

namespace gpt {

// What the schedule decides per step (§5) plus run-wide switches.
struct StepConfig {
  int64_t window_short = 0;      // tokens (§5.4)
  int64_t window_long = 0;       // tokens, layers 3 and 10
  double attention_scale = 0.1;  // τ (§2.11)
  // Mutation proof of the reference check (scripts/reference-check): this layer's attention scale is τ × the factor
  // (1.01: a 1% error in one op that the check must detect). −1 (always, outside that check): no layer is perturbed.
  int perturbed_attention_layer = -1;
  double perturbed_attention_factor = 1.0;
  // Mutation proof of the reference check: the MUDD coefficients μ = M_0(x) of layer 10 are scaled by 0.1 × this
  // factor instead of 0.1 (§2.7), so every one of the 14 coefficients moves by it. 1 outside that check.
  double perturbed_mudd_scale_factor = 1.0;
  // Rotary tables [P, head_dim/4] in the activation dtype on the model's device, P ≥ 2T (shared by the normal
  // and paired layouts, kernels/rotary.h).
  Tensor rotary_cos, rotary_sin;
  std::vector<float> mtp_weights{1.0f};  // w_0 … w_{n−1} (§5.3)
  float prefix_weight = 0.0f;            // w_P (§5.3)
  Tensor prefix_table;                   // i64 [V] on the device, or undefined (all −1: no prefix term)
  int64_t accumulation_steps = 1;        // A: the training loss is scaled by 1/A (§3.3) and grad_s uses it (§7.1)
  bool fp8_lm_head = false;              // §7.1 (the reference always uses it in training)
  bool fp8_mlp = false;                  // §7.2 (DISABLE_FP8 turns it off)
  int64_t validation_chunk_rows = 4096;  // rows of logits alive at once in validation (§3.4)
  // §S.4 sampled softmax of the training loss, per microbatch (candidate_sampler.h builds it from C); inactive =
  // full softmax. Validation ignores it.
  SampledSoftmaxInputs sampled_softmax;
  // §S.6 canonical mask, u8 [V, V/8] on the device (trainer/tokenizer/canonical_mask.h), or undefined for none.
  // Read only by validation_loss (the final validation); training ignores it.
  Tensor canonical_mask;
  std::function<void()> after_forward;  // profiling hook: runs between a training forward and its backward
  // Overlap of the gradient reductions with the backward (trainer/optim/optimizer.h): when set, the training
  // backward calls it each time a group of parameters has its final gradient for this microbatch (names in a fixed
  // order, the same on every rank): no later op of that backward writes them. Groups, in backward order: the
  // parameters first read by the loss, by layer 10 and the post-loop mix, by layers 0-9 (see
  // kFinalAfter* in model.cpp); the rest are final when the backward returns.
  std::function<void(const std::vector<std::string>&)> gradients_final;
};

// A microbatch's host products (§1.5) placed on the model's device.
struct BatchTensors {
  int64_t tokens = 0;
  Tensor inputs;              // i32 [T]
  Tensor targets;             // i64 [T]
  Tensor cu_seqlens;          // i32 [R]
  Tensor cu_seqlens_doubled;  // i32 [R], for the paired-head view
  Tensor bigram_ids;          // i32 [T]
  Tensor sign_rows;           // i32 [T]
};
BatchTensors upload_batch(const Microbatch& batch, Device device);

// Registers the §2.2 parameters of `weights` (sharing their storage) with zeroed gradients; banks as
// ParamKind::bank, everything else Adam.
void register_parameters(ModelWeights& weights, ParameterSet& params);

class GptModel {
 public:
  // `params` holds every §2.2 parameter by name (register_parameters); it and `sign_table` must outlive the model.
  // Values are read from `params` at every forward, so in-place optimizer updates are seen.
  GptModel(const ModelDims& dims, ParameterSet& params, Tensor bigram_sign_table);

  // Forward and backward of one microbatch; returns the scaled loss (1/A)·Σ_t ℓ_t of §3.2–§3.3. `tape` must be
  // empty; it is empty again on return.
  double train_forward_backward(const Microbatch& batch, const StepConfig& config, Tape& tape);
  // The forward half of train_forward_backward: records the backward on `tape` (empty on entry) and returns the
  // scaled loss. Every recorded closure owns what it reads, so the caller may replay the tape later
  // (tape.backward(), or step by step with tape.backward_last() for diagnostics).
  double train_forward(const Microbatch& batch, const StepConfig& config, Tape& tape);
  // Mean of ℓ_t (§3.4) over the window's positions: bf16 logits, fp32 softcap and log-sum-exp, chunked; with
  // config.canonical_mask defined, masked columns get z = −60 first (§S.6, kernels/masked_validation_loss.h).
  double validation_loss(const Microbatch& batch, const StepConfig& config);
  // The training objective (1/A)·Σ_t ℓ_t of the same forward without FP8 and without a backward (finite
  // differences, diagnostics).
  double training_objective(const Microbatch& batch, const StepConfig& config);
  // The raw logits z_raw [T, V] of the evaluation forward (no FP8): for tests and tools.
  Tensor logits(const Microbatch& batch, const StepConfig& config);

  // §7.2 W2 scale refresh after an optimizer step (bootstrap before training and after steps s < 16), and the
  // reset of the delayed scales (§9.1). The refresh also makes the FP8 copies of the MLP weights and of lm_head
  // that every training microbatch until the next refresh reads (kernels/fp8_linear.h): whoever changes the
  // weights calls it before the next FP8 forward (the step runner after each optimizer step, the run after a
  // state restore). Without a refresh the FP8 forward quantizes the weights itself; a reset drops the copies.
  void refresh_fp8(bool bootstrap);
  void reset_fp8();

  // §S.2: the n-gram table that replaces bigram_embed (required when dims.ngram_rows > 0; must outlive the model
  // and every tape it records on). Its sign pool is the model's bigram_sign_table.
  void set_ngram_table(NgramTable* table);

  const ModelDims& dims() const { return dims_; }
  DType activation_dtype() const;

 private:
  ParameterSet& params_;
  ModelDims dims_;
  Tensor sign_table_;
  std::vector<MlpFp8State> mlp_fp8_;            // one per layer
  std::vector<MlpFp8Weights> mlp_fp8_weights_;  // one per layer once refresh_fp8 has run
  LmHeadFp8Copy lm_head_fp8_;                   // once refresh_fp8 has run
  LmHeadFp8Scales lm_head_fp8_scales_;          // §7.1 constants for lm_head_fp8_accumulation_ microbatches
  int64_t lm_head_fp8_accumulation_ = 0;        // 0: not made yet
  NgramTable* ngram_ = nullptr;
};

// §10.2 model FLOPs per training token at the given windows (GEMMs of the live weights + attention upper bound).
double model_flops_per_token(const ModelDims& dims, int64_t window_short, int64_t window_long);
double model_validation_flops_per_token(const ModelDims& dims);

}  // namespace gpt
