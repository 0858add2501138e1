#pragma once
// Internal to the model: the state of one forward pass, shared by the input stage, the layer loop, the last layer
// and the head (separate files, one per part of RECIPE §2).
#include <array>
#include <functional>
#include <vector>

#include "trainer/model/model.h"
#include "trainer/model/taped_ops.h"

namespace gpt::model_detail {

// Every §2.2 parameter as a Var whose gradient is the ParameterSet's buffer (bigram_embed stays empty when the
// set has none: the §S.2 n-gram table replaces it).
struct Params {
  Var embed, lm_head, value_embeds, bigram_embed;
  Var qk_bank, vo_bank, mlp_bank, ve_gate_bank;
  Var scalars, smear_gate, post_lambdas, resid_lambdas;
  Var mudd_w1, mudd_w2, mudd_b2, mudd_gate_w1, mudd_gate_w2, mudd_gate_b2, mudd_gate_scale;
};
Params bind_params(ParameterSet& set);

struct Forward {
  Forward(Tape& tape_, const ModelDims& dims_, const StepConfig& config_, const BatchTensors& batch_, Params& p_,
          Tensor sign_table_, std::vector<MlpFp8State>* mlp_fp8_)
      : tape(tape_),
        dims(dims_),
        config(config_),
        batch(batch_),
        p(p_),
        sign_table(std::move(sign_table_)),
        mlp_fp8(mlp_fp8_) {}

  Tape& tape;
  const ModelDims& dims;
  const StepConfig& config;
  const BatchTensors& batch;
  Params& p;
  Tensor sign_table;
  std::vector<MlpFp8State>* mlp_fp8 = nullptr;  // non-null: §7.2 FP8 MLP forward
  // The FP8 weight copies of the last refresh (GptModel::refresh_fp8), null or empty when there are none: then the
  // FP8 products quantize the weights themselves.
  const std::vector<MlpFp8Weights>* mlp_fp8_weights = nullptr;
  const LmHeadFp8Copy* lm_head_fp8 = nullptr;
  const LmHeadFp8Scales* lm_head_fp8_scales = nullptr;  // §7.1 constants of this step's accumulation
  NgramTable* ngram = nullptr;                          // non-null: §S.2 Ng replaces Bg (needs `microbatch`)
  const Microbatch* microbatch = nullptr;               // the host microbatch (n-gram row ids)

  // Activations kept across layers (§2.5, §2.8, §2.12).
  Var x;                     // residual stream
  Var x0, bigram;            // norm(smeared embedding), Bg (or Ng of §S.2 when the n-gram table is on)
  std::array<Var, 5> value;  // ve_p, p = 0..4
  Var pre_gate, post_gate;   // MG_0(x0) [T, 26], MG_1 [T, 41]
  Var cache0, cache3, cache7, cache9;
  Var cache7_normed;  // norm(cache7): attention input of layers 8-10
  // norm(x) of a residual x made by the mix that made x (taped::mix_normed), until the rmsnorm that reads x.
  taped::PendingNorm pending_norm;

  // The fp32 scalar parameter entry `index` of a flat view of `param`, as a [1] Var.
  Var scalar(Var& param, int64_t index);
  // Matrix `index` of a stack [count, rows, cols] viewed flat as [count·rows/rows_per, ...]: rows
  // [index·rows, (index+1)·rows) of param viewed as [-1, cols].
  Var rows(Var& param, int64_t cols, int64_t begin, int64_t end);
};

// §2.5: e, smear, x0, Bg, value planes, pre gate, x = x0 + G[19]·Bg, cache0.
void input_stage(Forward& f);
// §2.6 (scale = γ, rounded to bf16: ScalarFn::identity) and §2.7 (scale = the constant 0.1 in fp32:
// ScalarFn::unrounded): (GELU(u·W1ᵀ)·W2[0:n]ᵀ + b[0:n])·scale, stack slot k.
Var mudd_mlp(Forward& f, Var& w1_stack, Var& w2_stack, Var& b2_stack, int64_t k, int64_t lanes, Var u, Var scale,
             ScalarFn scale_fn);
// §2.8 layers 0-9.
void layer_loop(Forward& f);
// §2.12 layer 10 and the post-loop mix; returns h = norm(x).
Var last_layer_and_head(Forward& f);

// Attention sublayer of layer i (§2.9). `inject` replaces the value injection of step 6 when set (layer 10).
struct AttentionInputs {
  Var u;                                  // norm(x) or norm(cache7)
  std::function<Var(Var v)> inject = {};  // v -> v + aux (layer 10)
};
Var attention_sublayer(Forward& f, int layer, AttentionInputs in);
// MLP part input: MLP_i(norm(x)) (§2.10).
Var mlp_sublayer(Forward& f, int layer, Var x);

// §3: training loss with its fused gradient pushed on the tape (returns the scaled loss), validation loss sum.
double training_loss(Forward& f, Var h);
double validation_loss_sum(Forward& f, Var h);

}  // namespace gpt::model_detail
