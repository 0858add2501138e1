#include "trainer/model/weights.h"

#include <cmath>
#include <numbers>

#include "trainer/model/rng.h"

namespace gpt {

namespace {
int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }
}  // namespace

ModelDims ModelDims::head(int64_t world_size) {
  ModelDims d;
  d.world_size = world_size;
  return d;
}

ModelDims ModelDims::tiny() {
  ModelDims d;
  d.model_dim = 96;
  d.head_dim = 16;
  d.mlp_hidden = 384;
  d.bigram_rows = 50304;
  return d;
}

int64_t ModelDims::qk_slots() const { return round_up(6 * attn_slots(), world_size); }
int64_t ModelDims::vo_slots() const { return round_up(2 * attn_slots(), world_size); }
float ModelDims::bank_init_bound() const {
  return static_cast<float>(std::sqrt(3.0) * 0.5 / std::sqrt(static_cast<double>(model_dim)));
}

std::vector<ParameterInfo> parameter_table(const ModelDims& m) {
  GPT_CHECK(m.num_heads * m.head_dim == m.model_dim, "model dims: heads × head_dim (", m.num_heads, " × ", m.head_dim,
            ") must equal model_dim ", m.model_dim);
  const int64_t d = m.model_dim;
  const DType b = DType::bf16, f = DType::f32;
  std::vector<ParameterInfo> table{
      {"embed", {m.vocab, d}, b, false},
      {"lm_head", {d, m.vocab}, b, false},
      {"value_embeds", {m.value_planes * m.vocab, d}, b, false},
      {"bigram_embed", {m.bigram_rows, d}, b, false},
      {"qk_bank", {m.qk_slots(), 2 * m.head_dim, d}, b, true},
      {"vo_bank", {m.vo_slots(), d, d}, b, true},
      {"mlp_bank", {m.mlp_slots(), 2, m.mlp_hidden, d}, b, true},
      {"ve_gate_bank", {m.value_planes, m.num_heads, 12}, b, false},
      {"scalars", {24}, f, false},
      {"smear_gate", {1, 12}, b, false},
      {"post_lambdas", {m.num_layers, 2}, f, false},
      {"resid_lambdas", {m.num_layers, 2}, f, false},
      {"mudd_w1", {2, m.mudd_hidden, d}, b, false},
      {"mudd_w2", {2, 14, m.mudd_hidden}, b, false},
      {"mudd_b2", {2, 14}, b, false},
      {"mudd_gate_w1", {2, m.mudd_hidden, d}, b, false},
      {"mudd_gate_w2", {2, 41, m.mudd_hidden}, b, false},
      {"mudd_gate_b2", {2, 41}, b, false},
      {"_mudd_gate_scale", {}, f, false},
  };
  if (m.ngram_rows > 0) std::erase_if(table, [](const ParameterInfo& p) { return p.name == "bigram_embed"; });
  return table;
}

int64_t total_parameter_count(const ModelDims& dims) {
  int64_t n = 0;
  for (const ParameterInfo& p : parameter_table(dims)) n += shape_numel(p.shape);
  return n;
}

std::vector<std::pair<std::string, Tensor*>> ModelWeights::parameters() {
  return {{"embed", &embed},
          {"lm_head", &lm_head},
          {"value_embeds", &value_embeds},
          {"bigram_embed", &bigram_embed},
          {"qk_bank", &qk_bank},
          {"vo_bank", &vo_bank},
          {"mlp_bank", &mlp_bank},
          {"ve_gate_bank", &ve_gate_bank},
          {"scalars", &scalars},
          {"smear_gate", &smear_gate},
          {"post_lambdas", &post_lambdas},
          {"resid_lambdas", &resid_lambdas},
          {"mudd_w1", &mudd_w1},
          {"mudd_w2", &mudd_w2},
          {"mudd_b2", &mudd_b2},
          {"mudd_gate_w1", &mudd_gate_w1},
          {"mudd_gate_w2", &mudd_gate_w2},
          {"mudd_gate_b2", &mudd_gate_b2},
          {"_mudd_gate_scale", &mudd_gate_scale}};
}

Tensor& ModelWeights::by_name(const std::string& name) {
  for (auto& [n, t] : parameters())
    if (n == name) return *t;
  GPT_FAIL("unknown parameter name '", name, "'");
}

namespace {

// Host-side values of one parameter, filled per §2.2 and then stored once in the target dtype. Every initial
// value is exactly representable in fp32 (most in bf16), so float storage loses nothing even for f64 runs.
struct HostValues {
  std::vector<float> v;
  explicit HostValues(const Shape& shape) : v(static_cast<size_t>(shape_numel(shape)), 0.0f) {}
};

// Values stored in bf16 are computed in fp32 then rounded (§2.2), except where noted.
float as_bf16(double x) { return round_bf16(static_cast<float>(x)); }

void fill_uniform(std::span<float> out, double bound, Rng& rng) {
  for (float& x : out) x = as_bf16(static_cast<float>(rng.uniform(-bound, bound)));
}

}  // namespace

ModelWeights init_weights(const ModelDims& dims, uint64_t seed, DType float_dtype, Device device) {
  GPT_CHECK(is_floating(float_dtype), "init_weights: float dtype must be f64, f32 or bf16");
  ModelWeights w;
  w.dims = dims;
  Rng rng(seed);
  const int64_t d = dims.model_dim;
  const double bound = dims.bank_init_bound();
  const double mudd_bound = 1.0 / std::sqrt(static_cast<double>(d));
  const double sqrt11 = std::sqrt(1.1);

  for (const ParameterInfo& info : parameter_table(dims)) {
    HostValues h(info.shape);
    std::span<float> v(h.v);
    const std::string& n = info.name;
    if (n == "lm_head") {
      for (float& x : v) x = as_bf16(0.005 * rng.normal());  // drawn directly in bf16
    } else if (n == "embed") {
      continue;  // copy of lm_headᵀ, below
    } else if (n == "value_embeds") {
      for (float& x : v) x = as_bf16(0.01f * as_bf16(rng.normal()));  // two roundings
    } else if (n == "qk_bank" || n == "vo_bank") {
      const int64_t live = n == "qk_bank" ? 6 * dims.attn_slots() : 2 * dims.attn_slots();
      const int64_t per_slot = info.shape[1] * info.shape[2];
      fill_uniform(v.subspan(0, static_cast<size_t>(live * per_slot)), bound, rng);
    } else if (n == "mlp_bank") {
      const int64_t per_matrix = dims.mlp_hidden * d;
      for (int64_t k = 0; k < dims.mlp_slots(); ++k)  // [k,0] uniform (incl. padding slot 11), [k,1] zero
        fill_uniform(v.subspan(static_cast<size_t>(2 * k * per_matrix), static_cast<size_t>(per_matrix)), bound, rng);
    } else if (n == "scalars") {
      for (int64_t i = 0; i < 11; ++i) {
        v[2 * i] = 0.5;
        v[2 * i + 1] = 1.0;
      }
      v[22] = 0.0;
      v[23] = -1.5;
    } else if (n == "post_lambdas") {
      for (float& x : v) x = 1.0f;
    } else if (n == "resid_lambdas") {
      for (float& x : v) x = static_cast<float>(sqrt11);
    } else if (n == "mudd_w1" || n == "mudd_gate_w1") {
      fill_uniform(v, mudd_bound, rng);
    } else if (n == "mudd_b2") {  // §2.7
      const float s = as_bf16(static_cast<float>(sqrt11) / 0.1f);
      v[6] = v[7] = 20;
      v[8] = s;
      v[9] = 10;
      v[11] = 0.5;
      v[12] = s;
      v[13] = 10;
      v[14 + 1] = -5;
    } else if (n == "mudd_gate_b2") {  // §2.6: [0] pre gate (26 lanes read), [1] post gate (41 lanes)
      for (int i = 12; i < 18; ++i) v[i] = v[41 + i] = 2.5;
      for (int i : {19, 21, 23, 25}) v[i] = 0.5;
      for (int i : {19, 21, 23, 25, 27}) v[41 + i] = 0.5;
      v[41 + 28] = 5;
      for (int i = 29; i < 35; ++i) v[41 + i] = 10;
    } else if (n == "_mudd_gate_scale") {
      v[0] = 0.1f;
    }
    // Everything else (bigram_embed, banks' padding, ve_gate_bank, smear_gate, *_w2) starts at zero.
    const DType dtype = info.dtype == DType::bf16 || float_dtype == DType::f64 ? float_dtype : info.dtype;
    w.by_name(n) = Tensor::from_floats(h.v, info.shape, dtype, device);
  }

  // embed = lm_headᵀ (§2.2: tied until the split).
  {
    const std::vector<float> head = w.lm_head.to_floats();
    std::vector<float> t(head.size());
    const int64_t V = dims.vocab;
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < V; ++j) t[static_cast<size_t>(j * d + i)] = head[static_cast<size_t>(i * V + j)];
    w.embed = Tensor::from_floats(t, {V, d}, w.lm_head.dtype(), device);
  }

  // §2.3 sign table: sign(N(0,1)) ∈ {−1, +1}.
  {
    std::vector<float> s(static_cast<size_t>(dims.sign_rows * d));
    for (float& x : s) x = rng.normal() >= 0 ? 1.0f : -1.0f;
    w.bigram_sign_table = Tensor::from_floats(s, {dims.sign_rows, d}, float_dtype, device);
  }
  return w;
}

}  // namespace gpt
