// RECIPE §2.12: layer 10 driven by the MUDD coefficients μ = M_0(x), the post-loop mix μ' = M_1(x), and h = norm(x).
#include "trainer/model/model_forward.h"

namespace gpt::model_detail {

Var last_layer_and_head(Forward& f) {
  using taped::term;
  Tape& tape = f.tape;
  Params& p = f.p;
  const int64_t tokens = f.batch.tokens, heads = f.dims.num_heads, head_dim = f.dims.head_dim;
  const Tensor& like = f.x.value();
  // The MUDD coefficient MLPs scale by the constant 0.1 (§2.7), in fp32 like the reference's Python-float factor.
  auto constant = [&like](double value) {
    return taped::constant(
        Tensor::from_doubles(std::vector<double>{value}, {1}, stat_dtype(like.dtype()), like.device()));
  };
  Var tenth = constant(0.1);

  f.cache9 = f.x;
  const double mu_scale = f.config.perturbed_mudd_scale_factor;  // 1 except in the reference check's mutation proof
  Var mu = mudd_mlp(f, p.mudd_w1, p.mudd_w2, p.mudd_b2, 0, 14, f.x, mu_scale == 1.0 ? tenth : constant(0.1 * mu_scale),
                    ScalarFn::unrounded);
  Var x = taped::mix(tape, {term(f.x).times_lane(mu, 5).plus(1.0f), term(f.cache0).times_lane(mu, 3),
                            term(f.cache7).times_lane(mu, 4)});

  // Value injection: v + g ⊙ ve_4 + vm, g = μ6 on heads 0-2 and μ7 on heads 3-5, vm = μ0·cache0 + μ1·cache7 + μ2·x.
  auto per_head = [&](Var flat) { return taped::view(tape, flat, {tokens, heads, head_dim}); };
  Var ve4 = per_head(f.value[4]), c0 = per_head(f.cache0), c7 = per_head(f.cache7), c9 = per_head(f.cache9);
  auto inject = [&tape, mu, ve4, c0, c7, c9](Var v) {
    return taped::mix(tape, {term(v), term(ve4).times_lane(mu, 6, 2), term(c0).times_lane(mu, 0),
                             term(c7).times_lane(mu, 1), term(c9).times_lane(mu, 2)});
  };
  if (!f.cache7_normed.value().defined()) f.cache7_normed = taped::rmsnorm(tape, f.cache7, f.pending_norm);
  Var a = attention_sublayer(f, 10, {.u = f.cache7_normed, .inject = inject});

  x = taped::mix_normed(tape,
                        {term(x).times_lane(mu, 8), term(a).times_lane(mu, 9), term(f.cache0).times_lane(mu, 10),
                         term(f.bigram).times_lane(mu, 11)},
                        f.pending_norm);
  Var m = mlp_sublayer(f, 10, x);
  x = taped::mix(tape, {term(x).times_lane(mu, 12), term(m).times_lane(mu, 13)});

  // Post-loop mix with μ' = M_1(x) (5 coefficients).
  Var mu_post = mudd_mlp(f, p.mudd_w1, p.mudd_w2, p.mudd_b2, 1, 5, x, tenth, ScalarFn::unrounded);
  x = taped::mix_normed(tape,
                        {term(x), term(f.cache0).times_lane(mu_post, 0), term(f.cache7).times_lane(mu_post, 1),
                         term(f.cache9).times_lane(mu_post, 2), term(f.value[0]).times_lane(mu_post, 3),
                         term(f.cache3).times_lane(mu_post, 4)},
                        f.pending_norm);
  f.x = x;
  Var h = taped::rmsnorm(tape, x, f.pending_norm);
  GPT_CHECK(!f.pending_norm.waiting(), "model: a norm made with a mix was never read (", f.pending_norm.of.describe(),
            ")");
  return h;
}

}  // namespace gpt::model_detail
