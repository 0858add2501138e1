#pragma once
// Shared fixtures of the model tests: small dimensions, synthetic microbatches, step configs, perturbed weights.
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "kernels/rotary.h"
#include "trainer/data/host_products.h"
#include "trainer/model/model.h"

namespace gpt::testing {

// A small model with the full 11-layer topology: d = 48, 6 heads of 8, V = 512, 512 bigram rows.
inline ModelDims small_dims() {
  ModelDims d;
  d.model_dim = 48;
  d.num_heads = 6;
  d.head_dim = 8;
  d.vocab = 512;
  d.mlp_hidden = 64;
  d.bigram_rows = 512;
  d.mudd_hidden = 16;
  return d;
}

// A microbatch of documents with the given piece lengths (they sum to T + 1, §1.3): each piece starts with `bos`
// followed by tokens drawn uniformly from [0, vocab) (seeded). Host products as the loader makes them.
inline Microbatch make_microbatch(const std::vector<int64_t>& pieces, int64_t vocab, int32_t bigram_rows, int32_t bos,
                                  uint64_t seed, int32_t cu_rows = 8) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> buf;
  for (int64_t len : pieces) {
    buf.push_back(bos);
    for (int64_t i = 1; i < len; ++i) buf.push_back(token(rng));
  }
  Microbatch mb;
  mb.inputs.assign(buf.begin(), buf.end() - 1);
  for (size_t i = 1; i < buf.size(); ++i) mb.targets.push_back(buf[i]);
  mb.cu_seqlens = training_cu_seqlens(pieces, cu_rows);
  mb.bigram_ids = bigram_row_ids(mb.inputs, bigram_rows - 1);
  mb.sign_rows = bigram_sign_rows(mb.inputs);
  mb.max_seqlen = longest_segment(mb.cu_seqlens);
  return mb;
}

// Rotary tables for 2 × `tokens` positions in `dtype` on `device`.
inline StepConfig make_config(const ModelDims& dims, int64_t tokens, DType dtype, int64_t window_short,
                              int64_t window_long, double scale, Device device = Device::cpu) {
  StepConfig c;
  c.window_short = window_short;
  c.window_long = window_long;
  c.attention_scale = scale;
  const RotaryTables tables(dims.head_dim, 2 * tokens);
  c.rotary_cos = tables.cos_table(dtype, device);
  c.rotary_sin = tables.sin_table(dtype, device);
  return c;
}

// Adds N(0, σ²) noise to every parameter (σ per parameter, so that the zero-initialised ones and their paths
// take part), keeping the model well-conditioned.
inline void perturb_weights(ModelWeights& w, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const std::vector<std::pair<const char*, double>> sigmas = {
      {"embed", 0.3},        {"lm_head", 0.1},      {"value_embeds", 0.3},     {"bigram_embed", 0.3},
      {"qk_bank", 0.1},      {"vo_bank", 0.1},      {"mlp_bank", 0.1},         {"ve_gate_bank", 0.3},
      {"scalars", 0.2},      {"smear_gate", 0.3},   {"post_lambdas", 0.1},     {"resid_lambdas", 0.1},
      {"mudd_w1", 0.1},      {"mudd_w2", 0.2},      {"mudd_b2", 1.0},          {"mudd_gate_w1", 0.1},
      {"mudd_gate_w2", 0.2}, {"mudd_gate_b2", 1.0}, {"_mudd_gate_scale", 0.02}};
  for (const auto& [name, sigma] : sigmas) {
    Tensor& t = w.by_name(name);
    if (!t.defined()) continue;  // bigram_embed when the n-gram table replaces it
    std::vector<double> v = t.to_doubles();
    for (double& x : v) x += sigma * normal(rng);
    t = Tensor::from_doubles(v, t.shape(), t.dtype());
  }
}

// Noise relative to each parameter's own scale: N(0, (0.1·rms)²) on a parameter with rms > 0, N(0, 0.02²) on the
// zero-initialised ones, so that every path carries a gradient while the activations stay where init puts them.
// At the recipe's width (d = 768) this keeps the model well-conditioned: CPU bf16 against CPU f64 stays within a
// few percent for every gradient, whereas perturb_weights' absolute σ saturates the softcapped logits there and
// bf16 itself loses every gradient (relative error ≈ 1), which leaves nothing for a backend comparison to measure.
inline void perturb_relative(ModelWeights& w, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (auto& [name, tensor] : w.parameters()) {
    std::vector<double> v = tensor->to_doubles();
    double sum_sq = 0;
    for (double x : v) sum_sq += x * x;
    const double rms = v.empty() ? 0.0 : std::sqrt(sum_sq / static_cast<double>(v.size()));
    const double sigma = rms == 0 ? 0.02 : 0.1 * rms;
    for (double& x : v) x += sigma * normal(rng);
    *tensor = Tensor::from_doubles(v, tensor->shape(), tensor->dtype(), tensor->device());
  }
}

// CPU weights converted to `dtype` (fp32 parameters stay f32 unless dtype is f64), as init_weights stores them,
// and placed on `device`.
inline ModelWeights convert_weights(ModelWeights& w, DType dtype, Device device = Device::cpu) {
  ModelWeights out;
  out.dims = w.dims;
  for (const ParameterInfo& info : parameter_table(w.dims)) {
    const DType target = info.dtype == DType::bf16 || dtype == DType::f64 ? dtype : DType::f32;
    out.by_name(info.name) = w.by_name(info.name).to(target).to(device);
  }
  out.bigram_sign_table = w.bigram_sign_table.to(dtype).to(device);
  return out;
}

// A model over its own ParameterSet.
struct ModelHarness {
  ModelWeights weights;
  ParameterSet params;
  std::unique_ptr<GptModel> model;

  ModelHarness(const ModelHarness&) = delete;
  ModelHarness& operator=(const ModelHarness&) = delete;
  explicit ModelHarness(ModelWeights w) : weights(std::move(w)) {
    register_parameters(weights, params);
    model = std::make_unique<GptModel>(weights.dims, params, weights.bigram_sign_table);
  }
  Tensor& grad(const std::string& name) { return params.get(name).grad; }
  Tensor& value(const std::string& name) { return params.get(name).value; }
};

}  // namespace gpt::testing
