// RECIPE §2.5 (input stage) and the MUDD MLPs of §2.6/§2.7, plus the parameter binding shared by all parts.
#include "trainer/model/model_forward.h"

#include <string_view>

namespace gpt::model_detail {

using taped::term;

Params bind_params(ParameterSet& set) {
  auto bind = [&set](const char* name) {
    if (std::string_view(name) == "bigram_embed" && !set.contains(name)) return Var();
    Parameter& p = set.get(name);
    return taped::parameter(p.value, p.grad);
  };
  return Params{.embed = bind("embed"),
                .lm_head = bind("lm_head"),
                .value_embeds = bind("value_embeds"),
                .bigram_embed = bind("bigram_embed"),
                .qk_bank = bind("qk_bank"),
                .vo_bank = bind("vo_bank"),
                .mlp_bank = bind("mlp_bank"),
                .ve_gate_bank = bind("ve_gate_bank"),
                .scalars = bind("scalars"),
                .smear_gate = bind("smear_gate"),
                .post_lambdas = bind("post_lambdas"),
                .resid_lambdas = bind("resid_lambdas"),
                .mudd_w1 = bind("mudd_w1"),
                .mudd_w2 = bind("mudd_w2"),
                .mudd_b2 = bind("mudd_b2"),
                .mudd_gate_w1 = bind("mudd_gate_w1"),
                .mudd_gate_w2 = bind("mudd_gate_w2"),
                .mudd_gate_b2 = bind("mudd_gate_b2"),
                .mudd_gate_scale = bind("_mudd_gate_scale")};
}

Var Forward::scalar(Var& param, int64_t index) {
  Var flat = taped::view(tape, param, {param.value().numel()});
  return taped::slice(tape, flat, index, index + 1);
}

Var Forward::rows(Var& param, int64_t cols, int64_t begin, int64_t end) {
  Var matrix = taped::view(tape, param, {-1, cols});
  return taped::slice(tape, matrix, begin, end);
}

Var mudd_mlp(Forward& f, Var& w1_stack, Var& w2_stack, Var& b2_stack, int64_t k, int64_t lanes, Var u, Var scale,
             ScalarFn scale_fn) {
  const int64_t hidden = w1_stack.value().size(1);
  const int64_t stack_rows = w2_stack.value().size(1);  // 14 (coefficients) or 41 (gates)
  GPT_CHECK(lanes <= stack_rows, "mudd_mlp: ", lanes, " lanes from a stack of ", stack_rows);
  Var w1 = f.rows(w1_stack, f.dims.model_dim, k * hidden, (k + 1) * hidden);
  Var w2 = f.rows(w2_stack, hidden, k * stack_rows, k * stack_rows + lanes);
  Var b2_rows = f.rows(b2_stack, 1, k * stack_rows, k * stack_rows + lanes);
  Var b2 = taped::view(f.tape, b2_rows, {lanes});
  Var hidden_act = taped::gelu(f.tape, taped::linear(f.tape, u, w1));
  Var raw = taped::bias_add(f.tape, taped::linear(f.tape, hidden_act, w2), b2);
  taped::Term scaled = term(raw).scaled(scale);
  scaled.fn = scale_fn;
  return taped::mix(f.tape, {scaled});
}

void input_stage(Forward& f) {
  Tape& tape = f.tape;
  Params& p = f.p;
  // 1-3: embedding, smear (λ_smear = scalars[22]), x0 = norm(ẽ).
  Var e = taped::embedding(tape, p.embed, f.batch.inputs);
  Var smeared = taped::smear(tape, e, p.smear_gate, f.scalar(p.scalars, 22));
  f.x0 = taped::rmsnorm(tape, smeared);
  // 4-5: bigram embedding with the sign trick (or the §S.2 hashed n-gram embedding), value-embedding planes.
  GPT_CHECK(f.dims.ngram_rows == 0 || f.ngram != nullptr,
            "input stage: dims.ngram_rows > 0 but no n-gram table was set (GptModel::set_ngram_table)");
  if (f.ngram != nullptr) {
    GPT_CHECK(f.microbatch != nullptr, "input stage: the n-gram table needs the host microbatch");
    f.bigram = taped::ngram_embed(tape, *f.ngram, *f.microbatch);
  } else {
    f.bigram = taped::bigram(tape, p.bigram_embed, f.sign_table, f.batch.bigram_ids, f.batch.sign_rows);
  }
  for (int64_t plane = 0; plane < 5; ++plane)
    f.value[static_cast<size_t>(plane)] =
        taped::value_embedding(tape, p.value_embeds, f.batch.inputs, plane, f.dims.vocab);
  // 6-7: pre gate G = MG_0(x0) (26 lanes), x = x0 + G[19]·Bg.
  f.pre_gate = mudd_mlp(f, p.mudd_gate_w1, p.mudd_gate_w2, p.mudd_gate_b2, 0, 26, f.x0, f.scalar(p.mudd_gate_scale, 0),
                        ScalarFn::identity);
  f.x = taped::mix_normed(tape, {term(f.x0), term(f.bigram).times_lane(f.pre_gate, 19)}, f.pending_norm);
  f.cache0 = f.x;
}

}  // namespace gpt::model_detail
