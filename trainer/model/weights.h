#pragma once
// The `head` model's parameters and buffers (RECIPE §2.2, §2.3): shapes, dtypes, initialisation and counts.
//
// One struct of named tensors, so model code reads like RECIPE §2.2. Shapes derive from ModelDims, which covers
// the full model (d = 768) and the scaled-down recipes of §R (d = 96) with the same 11-layer topology.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace gpt {

struct ModelDims {
  int64_t model_dim = 768;  // d
  int64_t num_heads = 6;    // H
  int64_t head_dim = 128;   // Dh
  int64_t num_layers = 11;  // fixed by the topology of §2.1
  int64_t vocab = 50304;    // V, padded
  int64_t mlp_hidden = 3072;
  int64_t bigram_rows = 377280;  // M + 1
  int64_t ngram_rows = 0;        // §S.2 hashed n-gram table rows; > 0: the table replaces bigram_embed (no parameter)
  int64_t mudd_hidden = 64;
  int64_t value_planes = 5;
  int64_t sign_rows = 8192;
  int64_t world_size = 1;  // bank padding (§2.2): qk/vo slot counts rounded up to a multiple of W

  static ModelDims head(int64_t world_size = 1);
  static ModelDims tiny();  // §R.1

  int64_t attn_slots() const { return 10; }  // layers 0-5, 7-10 (layer 6 has no attention)
  int64_t qk_slots() const;                  // 6 per attention slot, padded
  int64_t vo_slots() const;                  // 2 per attention slot, padded
  int64_t mlp_slots() const { return 12; }   // 11 layers + 1 padding slot
  float bank_init_bound() const;             // √3·0.5·d^(−1/2)
};

struct ParameterInfo {
  std::string name;
  Shape shape;
  DType dtype;   // storage dtype in training (bf16 or f32)
  bool is_bank;  // NorMuon (qk_bank, vo_bank, mlp_bank) vs Adam
};

// Every trained parameter of §2.2 in a fixed order (the order of the table). bigram_embed is left out when the
// §S.2 n-gram table replaces it (dims.ngram_rows > 0); ModelWeights::bigram_embed then stays undefined.
std::vector<ParameterInfo> parameter_table(const ModelDims& dims);
int64_t total_parameter_count(const ModelDims& dims);

struct ModelWeights {
  ModelDims dims;
  Tensor embed, lm_head, value_embeds, bigram_embed;
  Tensor qk_bank, vo_bank, mlp_bank, ve_gate_bank;
  Tensor scalars, smear_gate, post_lambdas, resid_lambdas;
  Tensor mudd_w1, mudd_w2, mudd_b2;
  Tensor mudd_gate_w1, mudd_gate_w2, mudd_gate_b2, mudd_gate_scale;
  // Buffer (§2.3): ±1 signs, identical on every rank.
  Tensor bigram_sign_table;

  // The tensor of a parameter by its §2.2 name; throws on an unknown name.
  Tensor& by_name(const std::string& name);
  std::vector<std::pair<std::string, Tensor*>> parameters();
};

// §2.2 initialisation from a seed (§U.6: the reference is unseeded, only the distributions are normative).
// `float_dtype` replaces bf16 storage (f64 for gradient checks, f32 for CPU runs); fp32 parameters stay f32
// unless float_dtype is f64.
ModelWeights init_weights(const ModelDims& dims, uint64_t seed, DType float_dtype = DType::bf16,
                          Device device = Device::cpu);

}  // namespace gpt
