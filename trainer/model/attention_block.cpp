// RECIPE §2.9 (attention sublayer of layer i, slot j) and §2.10 (MLP sublayer).
#include "trainer/model/layer_plan.h"
#include "trainer/model/model_forward.h"

namespace gpt::model_detail {

namespace {

Var gate_lanes(Forward& f, GateMlp gate) {
  GPT_CHECK(gate != GateMlp::none, "model: a gate lane was read from no gate MLP");
  return gate == GateMlp::pre ? f.pre_gate : f.post_gate;
}

}  // namespace

Var attention_sublayer(Forward& f, int layer, AttentionInputs in) {
  const LayerPlan& plan = kLayerPlans[static_cast<size_t>(layer)];
  GPT_CHECK(plan.attention, "model: layer ", layer, " has no attention");
  Tape& tape = f.tape;
  Params& p = f.p;
  const int64_t d = f.dims.model_dim, heads = f.dims.num_heads, head_dim = f.dims.head_dim;
  const int64_t tokens = f.batch.tokens;
  const int64_t j = attention_slot(layer);

  // Step 2: projections with the λ-scaled weights bf16(λq·[Q; K; V]) and bf16(λo·O).
  Var lambda_q = f.scalar(p.scalars, 2 * layer);
  Var lambda_o = f.scalar(p.scalars, 2 * layer + 1);
  const int64_t slot_rows = 2 * head_dim;  // one qk_bank slot = two heads
  Var wq = taped::scale_weight(tape, f.rows(p.qk_bank, d, 6 * j * slot_rows, (6 * j + 3) * slot_rows), lambda_q);
  Var wk = taped::scale_weight(tape, f.rows(p.qk_bank, d, (6 * j + 3) * slot_rows, (6 * j + 6) * slot_rows), lambda_q);
  Var wv = taped::scale_weight(tape, f.rows(p.vo_bank, d, 2 * j * d, (2 * j + 1) * d), lambda_q);
  Var wo = taped::scale_weight(tape, f.rows(p.vo_bank, d, (2 * j + 1) * d, (2 * j + 2) * d), lambda_o);
  auto per_head = [&](Var flat) { return taped::view(tape, flat, {tokens, heads, head_dim}); };
  Var q = per_head(taped::linear(tape, in.u, wq));
  Var k = per_head(taped::linear(tape, in.u, wk));
  Var v = per_head(taped::linear(tape, in.u, wv));

  // Steps 3-5: QK-norm, rotary (paired table on paired layers), partial key offset.
  const RotaryLayout layout = plan.paired ? RotaryLayout::paired : RotaryLayout::normal;
  q = taped::qk_norm_rotary(tape, q, f.config.rotary_cos, f.config.rotary_sin, layout);
  k = taped::qk_norm_rotary(tape, k, f.config.rotary_cos, f.config.rotary_sin, layout);
  if (plan.key_offset) k = taped::key_offset(tape, k);

  // Step 6: value injection.
  if (in.inject) {
    v = in.inject(v);
  } else if (plan.value_plane >= 0) {
    Var ve = per_head(f.value[static_cast<size_t>(plan.value_plane)]);
    Var gate = f.rows(p.ve_gate_bank, 12, plan.value_gate * heads, (plan.value_gate + 1) * heads);
    v = taped::value_gate(tape, v, in.u, ve, gate);
  }

  // Step 7: core attention (+ DC correction on layer 10).
  const int64_t window = plan.long_window ? f.config.window_long : f.config.window_short;
  // The reference check's mutation proof only.
  const double perturbation = layer == f.config.perturbed_attention_layer ? f.config.perturbed_attention_factor : 1.0;
  const auto scale = static_cast<float>(f.config.attention_scale * perturbation);
  Var y = taped::attention(tape, q, k, v, f.batch.cu_seqlens, f.batch.cu_seqlens_doubled, plan.paired, window, scale);
  if (layer == 10) y = taped::dc_attention(tape, q, k, v, f.batch.cu_seqlens, f.post_gate, {29, 35}, y, scale);

  // Steps 8-10: gated XSA, output gate, output projection.
  if (plan.xsa.present()) y = taped::xsa(tape, y, v, gate_lanes(f, plan.xsa.gate), plan.xsa.lane);
  if (plan.out_gate.present()) y = taped::head_gate(tape, y, gate_lanes(f, plan.out_gate.gate), plan.out_gate.lane);
  Var y_flat = taped::view(tape, y, {tokens, d});
  return taped::linear(tape, y_flat, wo);
}

Var mlp_sublayer(Forward& f, int layer, Var x) {
  const int64_t d = f.dims.model_dim, hidden = f.dims.mlp_hidden;
  Var w1 = f.rows(f.p.mlp_bank, d, 2 * layer * hidden, (2 * layer + 1) * hidden);
  Var w2 = f.rows(f.p.mlp_bank, d, (2 * layer + 1) * hidden, (2 * layer + 2) * hidden);
  MlpFp8State* fp8 = f.mlp_fp8 != nullptr ? &(*f.mlp_fp8)[static_cast<size_t>(layer)] : nullptr;
  const bool copies = fp8 != nullptr && f.mlp_fp8_weights != nullptr && !f.mlp_fp8_weights->empty();
  const MlpFp8Weights* fp8_weights = copies ? &(*f.mlp_fp8_weights)[static_cast<size_t>(layer)] : nullptr;
  return taped::mlp(f.tape, taped::rmsnorm(f.tape, x, f.pending_norm), w1, w2, fp8, fp8_weights);
}

void layer_loop(Forward& f) {
  Tape& tape = f.tape;
  Params& p = f.p;
  using taped::term;
  for (int i = 0; i < 10; ++i) {
    const LayerPlan& plan = kLayerPlans[static_cast<size_t>(i)];
    if (i == 4)  // post gate from the residual at the start of layer 4
      f.post_gate = mudd_mlp(f, p.mudd_gate_w1, p.mudd_gate_w2, p.mudd_gate_b2, 1, 41, f.x,
                             f.scalar(p.mudd_gate_scale, 0), ScalarFn::identity);
    if (!plan.attention) {  // layer 6: gated skip from cache3
      f.x = taped::mix_normed(
          tape,
          {term(f.x), term(f.cache3).sigmoid_scaled(f.scalar(p.scalars, 23)).times_lane(f.post_gate, kPostSkipLane)},
          f.pending_norm);
    } else {
      Var u;
      if (plan.from_cache7) {
        if (!f.cache7_normed.value().defined()) f.cache7_normed = taped::rmsnorm(tape, f.cache7, f.pending_norm);
        u = f.cache7_normed;
      } else {
        u = taped::rmsnorm(tape, f.x, f.pending_norm);
      }
      Var a = attention_sublayer(f, i, {.u = u});
      std::vector<taped::Term> terms = {
          term(f.x).scaled(f.scalar(p.resid_lambdas, 2 * i)),
          term(a).scaled(f.scalar(p.post_lambdas, 2 * i)),
          term(f.x0).times_lane(gate_lanes(f, plan.x0.gate), plan.x0.lane),
      };
      if (i != 0) terms.push_back(term(f.bigram).times_lane(gate_lanes(f, plan.bigram.gate), plan.bigram.lane));
      f.x = taped::mix_normed(tape, terms, f.pending_norm);
    }
    Var m = mlp_sublayer(f, i, f.x);
    // A norm reads this x next when layer i + 1 normalises its own input, or as cache7 (i = 7, normalised once for
    // layers 8-10); after layers 5, 8 and 9 none does (layer 6 has no attention, 9 and 10 read norm(cache7), and
    // layer 10 mixes x first).
    const std::vector<taped::Term> residual = {term(f.x).scaled(f.scalar(p.resid_lambdas, 2 * i + 1)),
                                               term(m).scaled(f.scalar(p.post_lambdas, 2 * i + 1))};
    const bool normed_next = i == 7 || (i + 1 < 10 && kLayerPlans[static_cast<size_t>(i + 1)].attention &&
                                        !kLayerPlans[static_cast<size_t>(i + 1)].from_cache7);
    f.x = normed_next ? taped::mix_normed(tape, residual, f.pending_norm) : taped::mix(tape, residual);
    if (i == 3) f.cache3 = f.x;
    if (i == 7) f.cache7 = f.x;
  }
}

}  // namespace gpt::model_detail
