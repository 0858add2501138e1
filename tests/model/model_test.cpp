// Model-level behaviour of RECIPE §2/§3: loss at initialisation, validation, determinism, bf16 vs f32, the recipe's
// quirks (MTP gradient past the microbatch end, bigram position 1, paired heads), accumulation, FLOPs, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/flops.h"
#include "tests/common/gradcheck.h"
#include "tests/common/model_fixtures.h"
#include "trainer/model/taped_ops.h"

namespace gpt::testing {
namespace {

constexpr int32_t kBos = 50256;

double lse_of_softcapped(const std::vector<double>& z_raw, int64_t row, int64_t vocab) {
  double m = -INFINITY;
  std::vector<double> z(static_cast<size_t>(vocab));
  for (int64_t v = 0; v < vocab; ++v) {
    const double a = (z_raw[static_cast<size_t>(row * vocab + v)] + 5.0) / 7.5;
    z[static_cast<size_t>(v)] = 23.0 / (1.0 + std::exp(-a));
    m = std::max(m, z[static_cast<size_t>(v)]);
  }
  double s = 0;
  for (double x : z) s += std::exp(x - m);
  return m + std::log(s);
}

// (a) At initialisation lm_head ~ N(0, 0.005²) and h = norm(x) has unit RMS, so z_raw has a spread of about
// √96·0.005 ≈ 0.05 around 0 and the softcapped logits sit near 23·σ(2/3) ≈ 15.2 with a spread of ≈ 0.034: the
// softmax is nearly uniform and E[ℓ_t] ≈ ln V + var(z)/2 ≈ ln 50304 + 6e-4; the mean over T = 128 positions
// fluctuates around it by about 0.034/√128 ≈ 3e-3 (z of the target is one draw of that spread), hence 1.5e-2.
TEST(GptModel, TinyLossAtInitialisationIsLogVocabulary) {
  const ModelDims dims = ModelDims::tiny();
  ModelHarness h(init_weights(dims, 1234, DType::f32));
  const Microbatch mb = make_microbatch({40, 30, 59}, dims.vocab, static_cast<int32_t>(dims.bigram_rows), kBos, 1);
  const int64_t tokens = 128;
  StepConfig cfg = make_config(dims, tokens, DType::f32, 16, 48, 0.1);
  Tape tape;
  const double loss = h.model->train_forward_backward(mb, cfg, tape) / static_cast<double>(tokens);
  EXPECT_NEAR(loss, std::log(50304.0), 1.5e-2);
  // Validation: the same positions (next-token only), fp32 softcap without rounding: the same value here.
  const double val = h.model->validation_loss(mb, cfg);
  EXPECT_NEAR(val, loss, 1e-4);
  EXPECT_EQ(tape.size(), 0u);
}

// (d) Two forwards (and backwards) of the same microbatch give bitwise identical losses and gradients.
TEST(GptModel, ForwardAndBackwardAreBitwiseDeterministic) {
  const ModelDims dims = small_dims();
  ModelWeights w = init_weights(dims, 3, DType::f32);
  perturb_weights(w, 4);
  ModelHarness h(std::move(w));
  const Microbatch mb = make_microbatch({17, 20, 11, 1}, dims.vocab, 512, 0, 5);
  StepConfig cfg = make_config(dims, 48, DType::f32, 5, 12, 0.3);
  cfg.mtp_weights = {1.0f, 0.5f, 0.25f};
  Tape tape;
  h.params.zero_grads();
  const double first = h.model->train_forward_backward(mb, cfg, tape);
  std::vector<std::vector<double>> grads;
  for (const Parameter& p : h.params.all()) grads.push_back(p.grad.to_doubles());
  h.params.zero_grads();
  const double second = h.model->train_forward_backward(mb, cfg, tape);
  EXPECT_EQ(first, second);
  size_t k = 0;
  for (const Parameter& p : h.params.all()) EXPECT_EQ(p.grad.to_doubles(), grads[k++]) << p.name;
  EXPECT_EQ(h.model->validation_loss(mb, cfg), h.model->validation_loss(mb, cfg));
}

// The recorded tape owns everything its closures read: replaying it step by step after train_forward returns
// (Tape::backward_last, the lockstep diagnostic of the GPU tests) gives bitwise the gradients of
// train_forward_backward, and every step names its op and carries its output Var first.
TEST(GptModel, StepwiseBackwardEqualsFullBackward) {
  const ModelDims dims = small_dims();
  ModelWeights w = init_weights(dims, 3, DType::f32);
  perturb_weights(w, 4);
  ModelHarness h(std::move(w));
  const Microbatch mb = make_microbatch({17, 20, 11, 1}, dims.vocab, 512, 0, 5);
  StepConfig cfg = make_config(dims, 48, DType::f32, 5, 12, 0.3);
  cfg.mtp_weights = {1.0f, 0.5f, 0.25f};
  Tape tape;
  h.params.zero_grads();
  const double full = h.model->train_forward_backward(mb, cfg, tape);
  std::vector<std::vector<double>> grads;
  for (const Parameter& p : h.params.all()) grads.push_back(p.grad.to_doubles());
  h.params.zero_grads();
  const double forward_only = h.model->train_forward(mb, cfg, tape);
  EXPECT_EQ(forward_only, full);
  ASSERT_GT(tape.size(), 100u);
  std::vector<std::string> labels;
  while (tape.size() > 0) {
    const TapeStep step = tape.backward_last();
    ASSERT_FALSE(step.vars.empty()) << step.label;
    labels.emplace_back(step.label);
  }
  EXPECT_EQ(labels.front(), "lm_head_loss");  // the last op recorded runs first
  EXPECT_EQ(labels.back(), "embedding");
  size_t k = 0;
  for (const Parameter& p : h.params.all()) EXPECT_EQ(p.grad.to_doubles(), grads[k++]) << p.name;
  EXPECT_THROW(tape.backward_last(), Error);
}

// Gradients accumulate across microbatches (§3.3, §4.1): the model never zeroes them.
TEST(GptModel, GradientsAccumulateAcrossCalls) {
  const ModelDims dims = small_dims();
  ModelWeights w = init_weights(dims, 3, DType::f64);
  perturb_weights(w, 4);
  ModelHarness h(std::move(w));
  const Microbatch mb = make_microbatch({30, 19}, dims.vocab, 512, 0, 8);
  const StepConfig cfg = make_config(dims, 48, DType::f64, 5, 12, 0.3);
  Tape tape;
  h.model->train_forward_backward(mb, cfg, tape);
  const std::vector<double> once = h.grad("qk_bank").to_doubles();
  h.model->train_forward_backward(mb, cfg, tape);
  const std::vector<double> twice = h.grad("qk_bank").to_doubles();
  std::vector<double> doubled;
  for (double g : once) doubled.push_back(2 * g);
  EXPECT_LT(max_relative_error(twice, doubled), 1e-14);
}

// (e) The bf16 model (§0.4 roundings) agrees with the f32 one within bf16 tolerance.
TEST(GptModel, Bf16AgreesWithF32WithinBf16Tolerance) {
  const ModelDims dims = small_dims();
  ModelWeights base = init_weights(dims, 21, DType::f64);
  perturb_weights(base, 22);
  ModelHarness h32(convert_weights(base, DType::f32));
  ModelHarness h16(convert_weights(base, DType::bf16));
  const Microbatch mb = make_microbatch({25, 24}, dims.vocab, 512, 0, 9);
  StepConfig c32 = make_config(dims, 48, DType::f32, 5, 12, 0.3);
  StepConfig c16 = make_config(dims, 48, DType::bf16, 5, 12, 0.3);
  c32.mtp_weights = c16.mtp_weights = {1.0f, 0.5f};
  Tape tape;
  const double l32 = h32.model->train_forward_backward(mb, c32, tape);
  const double l16 = h16.model->train_forward_backward(mb, c16, tape);
  EXPECT_NEAR(l16 / l32, 1.0, 2e-2);
  EXPECT_NEAR(h16.model->validation_loss(mb, c16), h32.model->validation_loss(mb, c32), 5e-2);
  for (const char* name : {"lm_head", "qk_bank", "vo_bank", "mlp_bank", "embed", "mudd_gate_w1"}) {
    const std::vector<double> g32 = h32.grad(name).to_doubles(), g16 = h16.grad(name).to_doubles();
    double diff = 0, norm = 0;
    for (size_t i = 0; i < g32.size(); ++i) {
      diff += (g16[i] - g32[i]) * (g16[i] - g32[i]);
      norm += g32[i] * g32[i];
    }
    EXPECT_LT(std::sqrt(diff / norm), 0.1) << name;  // relative Frobenius error of the whole gradient
  }
}

// (c) §3.2 quirk: S_w uses all MTP weights, also those whose target lies beyond the microbatch end. The model's
// gradient is then the exact gradient of L' = L + Σ_t Σ_{k: t+k ≥ T} w_k·lse_t, not of L.
TEST(GptModelQuirks, MtpGradientPastTheBatchEndUsesAllWeights) {
  const ModelDims dims = small_dims();
  ModelWeights w = init_weights(dims, 31, DType::f64);
  perturb_weights(w, 32);
  ModelHarness h(std::move(w));
  const Microbatch mb = make_microbatch({20, 29}, dims.vocab, 512, 0, 10);
  const int64_t tokens = 48, vocab = dims.vocab;
  StepConfig cfg = make_config(dims, tokens, DType::f64, 5, 12, 0.3);
  cfg.mtp_weights = {1.0f, 0.5f, 0.25f};
  Tape tape;
  h.params.zero_grads();
  h.model->train_forward_backward(mb, cfg, tape);
  const std::vector<double> analytic_lm = h.grad("lm_head").to_doubles();
  const std::vector<double> analytic_vo = h.grad("vo_bank").to_doubles();

  const auto plain = [&] { return h.model->training_objective(mb, cfg); };
  const auto surrogate = [&] {
    const std::vector<double> z = h.model->logits(mb, cfg).to_doubles();
    // Missing predictions: position T−1 misses k = 1, 2; position T−2 misses k = 2.
    const double extra =
        (0.5 + 0.25) * lse_of_softcapped(z, tokens - 1, vocab) + 0.25 * lse_of_softcapped(z, tokens - 2, vocab);
    return plain() + extra;
  };
  const std::vector<int64_t> lm_idx = {3, 700, 5000, 12345, 24000};
  const std::vector<int64_t> vo_idx = {11, 2400, 30000};
  for (auto [name, idx, analytic] :
       {std::tuple{"lm_head", lm_idx, analytic_lm}, std::tuple{"vo_bank", vo_idx, analytic_vo}}) {
    Tensor& value = h.value(name);
    std::vector<double> exact;
    for (int64_t i : idx) exact.push_back(analytic[static_cast<size_t>(i)]);
    const std::vector<double> fd_surrogate = numeric_gradient_at(surrogate, value, idx, 1e-5);
    const std::vector<double> fd_plain = numeric_gradient_at(plain, value, idx, 1e-5);
    EXPECT_LT(max_relative_error(exact, fd_surrogate, 1e-6), 1e-5) << name;
    EXPECT_GT(max_relative_error(exact, fd_plain, 1e-6), 1e-3) << name << ": the quirk must be visible";
  }
}

// (c) §2.5.2 quirk: position 1 hashes with the reserved value p_1 = M (not x_0), position 0 reads row M itself;
// the model reads exactly those rows (its gradient lands there and nowhere else).
TEST(GptModelQuirks, BigramPositionOneUsesTheReservedRow) {
  const ModelDims dims = small_dims();
  const int32_t m = static_cast<int32_t>(dims.bigram_rows - 1);
  const Microbatch mb = make_microbatch({25, 24}, dims.vocab, static_cast<int32_t>(dims.bigram_rows), 0, 12);
  const auto floor_mod = [](int32_t a, int32_t b) { return ((a % b) + b) % b; };
  const auto wrap_mul = [](int32_t a, int32_t b) {
    return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
  };
  EXPECT_EQ(mb.bigram_ids[0], m);
  EXPECT_EQ(mb.bigram_ids[1], floor_mod(wrap_mul(36313, mb.inputs[1]) ^ wrap_mul(27191, m), m));
  EXPECT_EQ(mb.bigram_ids[2], floor_mod(wrap_mul(36313, mb.inputs[2]) ^ wrap_mul(27191, mb.inputs[1]), m));

  ModelWeights w = init_weights(dims, 41, DType::f64);
  perturb_weights(w, 42);
  ModelHarness h(std::move(w));
  const StepConfig cfg = make_config(dims, 48, DType::f64, 5, 12, 0.3);
  Tape tape;
  h.params.zero_grads();
  h.model->train_forward_backward(mb, cfg, tape);
  const std::vector<double> g = h.grad("bigram_embed").to_doubles();
  std::vector<bool> hit(static_cast<size_t>(dims.bigram_rows), false);
  for (int32_t r : mb.bigram_ids) hit[static_cast<size_t>(r)] = true;
  const int64_t d = dims.model_dim;
  for (int64_t r = 0; r < dims.bigram_rows; ++r) {
    double norm = 0;
    for (int64_t c = 0; c < d; ++c) norm += std::abs(g[static_cast<size_t>(r * d + c)]);
    if (hit[static_cast<size_t>(r)])
      EXPECT_GT(norm, 0.0) << "row " << r;
    else
      EXPECT_EQ(norm, 0.0) << "row " << r;
  }
}

// (c) §2.9 step 7: in the paired view row 2t holds heads 0-2 of token t and row 2t+1 heads 3-5, so head slot g
// pairs original heads g and g+3: a query at row r sees rows r' in [max(2·start, r − w), r] of the same slot, i.e.
// the keys (token r'/2, head g + 3·(r' mod 2)). Brute force over that grid vs the taped op, two documents.
TEST(GptModelQuirks, PairedHeadsMapping) {
  const int64_t tokens = 12, heads = 6, dim = 4, window = 5;
  const Tensor q = random_tensor({tokens, heads, dim}, DType::f64, 1);
  const Tensor k = random_tensor({tokens, heads, dim}, DType::f64, 2);
  const Tensor v = random_tensor({tokens, heads, dim}, DType::f64, 3);
  const std::vector<int32_t> cu_host = {0, 5, 12, 12};
  Tensor cu = Tensor::empty({4}, DType::i32);
  for (int i = 0; i < 4; ++i) cu.data<int32_t>()[i] = cu_host[static_cast<size_t>(i)];
  Tensor cu2 = Tensor::empty({4}, DType::i32);
  double_cu_seqlens(cu, cu2);
  Tape tape;
  const double scale = static_cast<double>(0.7f);  // the op takes τ as a float
  const Var y = taped::attention(tape, taped::constant(q), taped::constant(k), taped::constant(v), cu, cu2,
                                 /*paired=*/true, window, static_cast<float>(scale));
  const std::vector<double> out = y.value().to_doubles(), qd = q.to_doubles(), kd = k.to_doubles(), vd = v.to_doubles();
  const auto at = [&](const std::vector<double>& a, int64_t t, int64_t h, int64_t c) {
    return a[static_cast<size_t>((t * heads + h) * dim + c)];
  };
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t seg_start = t < 5 ? 0 : 5;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t row = 2 * t + h / 3, slot = h % 3;  // position in the doubled sequence
      std::vector<double> logits, values;
      std::vector<std::pair<int64_t, int64_t>> keys;  // (token, head) of every visible key
      for (int64_t r = std::max(2 * seg_start, row - window); r <= row; ++r)
        keys.emplace_back(r / 2, slot + 3 * (r % 2));
      double m = -INFINITY;
      for (auto [s, g] : keys) {
        double dot = 0;
        for (int64_t c = 0; c < dim; ++c) dot += at(qd, t, h, c) * at(kd, s, g, c);
        logits.push_back(scale * dot);
        m = std::max(m, scale * dot);
      }
      double denom = 0;
      for (double l : logits) denom += std::exp(l - m);
      for (int64_t c = 0; c < dim; ++c) {
        double acc = 0;
        for (size_t i = 0; i < keys.size(); ++i)
          acc += std::exp(logits[i] - m) / denom * at(vd, keys[i].first, keys[i].second, c);
        EXPECT_NEAR(at(out, t, h, c), acc, 1e-12) << "token " << t << " head " << h;
      }
      if (h >= 3) {  // the query of head g+3 sees head g's key of its own token
        EXPECT_TRUE(std::find(keys.begin(), keys.end(), std::pair<int64_t, int64_t>{t, h - 3}) != keys.end());
      }
    }
  }
}

TEST(GptModel, FlopsPerTokenFollowTheFlopCounter) {
  const ModelDims head = ModelDims::head(8);
  // §10.2: 6·N_mm = 684.8 MFLOP per training token, plus the attention upper bound 16.6 MFLOP at stage 0.
  EXPECT_NEAR(model_flops_per_token(head, 128, 384) / 1e6, 684.8 + 16.6, 0.1);
  EXPECT_NEAR(model_validation_flops_per_token(head) / 1e6, 228.3, 0.1);
  const ModelDims tiny = ModelDims::tiny();
  const double tiny_gemm = 6.0 * (10 * 4 * 96 * 96 + 11 * 2 * 384 * 96 + 96 * 50304);
  EXPECT_NEAR(model_flops_per_token(tiny, 16, 48), tiny_gemm + 12.0 * 96 * (8 * 17 + 2 * 49), 1.0);
}

TEST(GptModel, BadConfigurationsAreRejectedWithTheirField) {
  const ModelDims dims = small_dims();
  ModelHarness h(init_weights(dims, 5, DType::f32));
  const Microbatch mb = make_microbatch({30, 19}, dims.vocab, 512, 0, 8);
  Tape tape;
  StepConfig cfg = make_config(dims, 48, DType::f32, 5, 12, 0.3);
  cfg.window_short = 0;
  EXPECT_THROW(h.model->train_forward_backward(mb, cfg, tape), Error);
  EXPECT_EQ(tape.size(), 0u);
  cfg = make_config(dims, 20, DType::f32, 5, 12, 0.3);  // rotary table too short for 2T rows
  EXPECT_THROW(h.model->validation_loss(mb, cfg), Error);
  cfg = make_config(dims, 48, DType::f64, 5, 12, 0.3);  // table dtype differs from the activations
  EXPECT_THROW(h.model->validation_loss(mb, cfg), Error);
  Microbatch bad = mb;
  bad.targets.pop_back();
  cfg = make_config(dims, 48, DType::f32, 5, 12, 0.3);
  EXPECT_THROW(h.model->train_forward_backward(bad, cfg, tape), Error);
  cfg.mtp_weights.clear();
  EXPECT_THROW(h.model->train_forward_backward(mb, cfg, tape), Error);
  ParameterSet empty;
  EXPECT_THROW(GptModel(dims, empty, h.weights.bigram_sign_table), Error);
}

}  // namespace
}  // namespace gpt::testing
