// RECIPE §S.4 sampled-softmax training loss (trainer/model/head_loss.cpp with StepConfig::sampled_softmax) and the
// column ops it uses (kernels/column_select.h): values against an independent f64 computation over C, central
// differences of the backward, zero gradient columns outside C, and P = V equal to the full softmax bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/column_select.h"
#include "tests/common/gradcheck.h"
#include "trainer/model/candidate_sampler.h"
#include "trainer/model/model_forward.h"

namespace gpt::testing {
namespace {

Tensor ids(const std::vector<int64_t>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i64);
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

TEST(ColumnSelect, GatherAndScatterAddMatchLoops) {
  const Tensor table = random_tensor({3, 10}, DType::f32, 1);
  const Tensor columns = ids({7, 0, 7, 9});
  Tensor narrow = Tensor::empty({3, 4}, DType::f32);
  column_gather(table, columns, narrow);
  const std::vector<double> t = table.to_doubles(), n = narrow.to_doubles();
  const int cols[4] = {7, 0, 7, 9};
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < 4; ++j) EXPECT_EQ(n[static_cast<size_t>(r * 4 + j)], t[static_cast<size_t>(r * 10 + cols[j])]);
  }
  Tensor dense = random_tensor({3, 10}, DType::f64, 2);
  std::vector<double> expected = dense.to_doubles();
  const Tensor src = random_tensor({3, 4}, DType::f64, 3);
  const std::vector<double> s = src.to_doubles();
  for (int r = 0; r < 3; ++r) {
    for (int j = 0; j < 4; ++j) expected[static_cast<size_t>(r * 10 + cols[j])] += s[static_cast<size_t>(r * 4 + j)];
  }
  column_scatter_add(src, columns, dense);
  EXPECT_EQ(dense.to_doubles(), expected);
  const Tensor bad = ids({10});
  Tensor one = Tensor::empty({3, 1}, DType::f32);
  EXPECT_THROW(column_gather(table, bad, one), Error);
  Tensor wrong = Tensor::empty({3, 5}, DType::f32);
  EXPECT_THROW(column_gather(table, columns, wrong), Error);
}

// A loss problem: h [T, d], lm_head [d, V], targets, a prefix table over V, and the candidate set C.
struct Problem {
  int64_t tokens = 12, dim = 6, vocab = 40;
  Tensor h, lm_head;
  std::vector<int64_t> targets, prefix, candidates;
};

Problem make_problem(DType dtype, uint64_t seed) {
  Problem p;
  p.h = random_tensor({p.tokens, p.dim}, dtype, seed, 1.0);
  p.lm_head = random_tensor({p.dim, p.vocab}, dtype, seed + 1, 1.5);
  std::mt19937_64 rng(seed + 2);
  std::uniform_int_distribution<int64_t> pick(0, 19);  // targets among the first 20 classes
  for (int64_t t = 0; t < p.tokens; ++t) p.targets.push_back(pick(rng));
  p.prefix.assign(static_cast<size_t>(p.vocab), -1);
  for (int64_t c = 0; c < 20; ++c) {
    if (c % 3 == 0) continue;
    p.prefix[static_cast<size_t>(c)] = (c * 7 + 3) % p.vocab;  // in C or not, depending on C
  }
  // C: every target plus the negatives 21, 25, 30, 33, 39 (some prefix classes fall inside C, some outside).
  std::vector<char> in(static_cast<size_t>(p.vocab), 0);
  for (int64_t y : p.targets) in[static_cast<size_t>(y)] = 1;
  for (int64_t c : {21, 25, 30, 33, 39}) in[static_cast<size_t>(c)] = 1;
  for (int64_t c = 0; c < p.vocab; ++c) {
    if (in[static_cast<size_t>(c)] != 0) p.candidates.push_back(c);
  }
  return p;
}

// The loss and gradients of model_detail::training_loss on h and lm_head alone.
struct LossRun {
  double loss = 0;
  std::vector<double> dh, dlm_head;
};

LossRun run_loss(const Problem& p, StepConfig config, bool sampled, bool with_prefix, Tensor& h_value,
                 Tensor& lm_value) {
  if (with_prefix) {
    config.prefix_table = Tensor::empty({p.vocab}, DType::i64);
    std::copy(p.prefix.begin(), p.prefix.end(), config.prefix_table.data<int64_t>());
  }
  if (sampled) {
    config.sampled_softmax =
        sampled_softmax_inputs(p.candidates, p.targets, with_prefix ? p.prefix : std::vector<int64_t>{}, Device::cpu);
  }
  BatchTensors batch;
  batch.tokens = p.tokens;
  batch.targets = Tensor::empty({p.tokens}, DType::i64);
  std::copy(p.targets.begin(), p.targets.end(), batch.targets.data<int64_t>());
  model_detail::Params params;
  Tensor lm_grad = Tensor::zeros(lm_value.shape(), lm_value.dtype());
  params.lm_head = Var::with_gradient_buffer(lm_value, lm_grad);
  Var h(h_value);
  Tape tape;
  ModelDims dims;
  model_detail::Forward f(tape, dims, config, batch, params, Tensor(), nullptr);
  LossRun out;
  out.loss = model_detail::training_loss(f, h);
  tape.backward();
  out.dh = h.grad().to_doubles();
  out.dlm_head = lm_grad.to_doubles();
  return out;
}

// ℓ over C in f64, written from §3.2 and §S.4: z = 23·σ((h·W[:, c] + 5)/7.5) for c ∈ C, lse over C, MTP terms
// w_k·(lse − z_{y[t+k]}) for t + k < T, prefix term w_P·(lse − z_p) when p = prefix[y[t]] ≥ 0 and p ∈ C.
double reference_loss(const Problem& p, const std::vector<float>& mtp, float prefix_weight, float loss_scale,
                      int* prefix_in = nullptr, int* prefix_out = nullptr) {
  const std::vector<double> h = p.h.to_doubles(), w = p.lm_head.to_doubles();
  auto in_c = [&](int64_t c) { return std::find(p.candidates.begin(), p.candidates.end(), c) != p.candidates.end(); };
  double total = 0;
  for (int64_t t = 0; t < p.tokens; ++t) {
    std::vector<double> z(static_cast<size_t>(p.vocab), NAN);
    double m = -INFINITY;
    for (int64_t c : p.candidates) {
      double raw = 0;
      for (int64_t i = 0; i < p.dim; ++i)
        raw += h[static_cast<size_t>(t * p.dim + i)] * w[static_cast<size_t>(i * p.vocab + c)];
      z[static_cast<size_t>(c)] = 23.0 / (1.0 + std::exp(-(raw + 5.0) / 7.5));
      m = std::max(m, z[static_cast<size_t>(c)]);
    }
    double sum = 0;
    for (int64_t c : p.candidates) sum += std::exp(z[static_cast<size_t>(c)] - m);
    const double lse = m + std::log(sum);
    for (size_t k = 0; k < mtp.size() && t + static_cast<int64_t>(k) < p.tokens; ++k) {
      total += mtp[k] * (lse - z[static_cast<size_t>(p.targets[static_cast<size_t>(t) + k])]);
    }
    const int64_t pre = p.prefix[static_cast<size_t>(p.targets[static_cast<size_t>(t)])];
    if (pre >= 0 && in_c(pre)) {
      total += prefix_weight * (lse - z[static_cast<size_t>(pre)]);
      if (prefix_in != nullptr) ++*prefix_in;
    } else if (pre >= 0 && prefix_out != nullptr) {
      ++*prefix_out;
    }
  }
  return total * loss_scale;
}

TEST(SampledSoftmaxLoss, EqualsAnIndependentF64ComputationOverC) {
  Problem p = make_problem(DType::f64, 5);
  StepConfig config;
  config.mtp_weights = {1.0f, 0.5f, 0.25f};
  config.prefix_weight = 0.3f;
  config.accumulation_steps = 2;
  int prefix_in = 0, prefix_out = 0;
  const double expected = reference_loss(p, config.mtp_weights, 0.3f, 0.5f, &prefix_in, &prefix_out);
  ASSERT_GT(prefix_in, 0);   // prefix targets inside C take part...
  ASSERT_GT(prefix_out, 0);  // ...and some fall outside C and are dropped
  const LossRun run = run_loss(p, config, true, true, p.h, p.lm_head);
  EXPECT_NEAR(run.loss, expected, 1e-12 * std::abs(expected));
  // Without the prefix table: MTP terms only.
  const LossRun plain = run_loss(p, config, true, false, p.h, p.lm_head);
  std::vector<int64_t> saved = p.prefix;
  p.prefix.assign(p.prefix.size(), -1);
  const double expected_plain = reference_loss(p, config.mtp_weights, 0.3f, 0.5f);
  p.prefix = saved;
  EXPECT_NEAR(plain.loss, expected_plain, 1e-12 * std::abs(expected_plain));
  // Dropping the omitted mass makes the sampled loss smaller than the full one (no correction, §S.4).
  const LossRun full = run_loss(p, config, false, true, p.h, p.lm_head);
  EXPECT_LT(run.loss, full.loss);
}

// Central differences (f64) of the sampled loss w.r.t. h and lm_head with one MTP weight and the prefix term
// (whose fused gradient is the exact derivative), and lm_head's gradient exactly zero outside C.
TEST(SampledSoftmaxLoss, BackwardMatchesCentralDifferencesAndLeavesOtherColumnsZero) {
  Problem p = make_problem(DType::f64, 7);
  StepConfig config;
  config.mtp_weights = {1.0f};
  config.prefix_weight = 0.4f;
  Tensor h = p.h.clone(), w = p.lm_head.clone();
  const LossRun run = run_loss(p, config, true, true, h, w);
  auto objective = [&]() { return run_loss(p, config, true, true, h, w).loss; };
  EXPECT_LT(max_relative_error(run.dh, numeric_gradient(objective, h)), 1e-7);
  EXPECT_LT(max_relative_error(run.dlm_head, numeric_gradient(objective, w)), 1e-7);
  int nonzero_in_c = 0;
  for (int64_t c = 0; c < p.vocab; ++c) {
    const bool in_c = std::find(p.candidates.begin(), p.candidates.end(), c) != p.candidates.end();
    for (int64_t i = 0; i < p.dim; ++i) {
      const double g = run.dlm_head[static_cast<size_t>(i * p.vocab + c)];
      if (!in_c) {
        EXPECT_EQ(g, 0.0) << "column " << c;
      }
      nonzero_in_c += in_c && g != 0.0;
    }
  }
  EXPECT_EQ(nonzero_in_c, p.dim * static_cast<int64_t>(p.candidates.size()));
}

// With several MTP weights the fused gradient keeps §3.1's quirk for the last n − 1 rows (all weights enter the
// softmax term); every earlier row of dh is the exact derivative.
TEST(SampledSoftmaxLoss, MtpGradientMatchesCentralDifferencesBeforeTheLastRows) {
  Problem p = make_problem(DType::f64, 9);
  StepConfig config;
  config.mtp_weights = {1.0f, 0.5f, 0.25f};
  config.prefix_weight = 0.2f;
  Tensor h = p.h.clone(), w = p.lm_head.clone();
  const LossRun run = run_loss(p, config, true, true, h, w);
  auto objective = [&]() { return run_loss(p, config, true, true, h, w).loss; };
  const std::vector<double> numeric = numeric_gradient(objective, h);
  const size_t exact_rows = static_cast<size_t>((p.tokens - 2) * p.dim);
  EXPECT_LT(max_relative_error(std::vector<double>(run.dh.begin(), run.dh.begin() + exact_rows),
                               std::vector<double>(numeric.begin(), numeric.begin() + exact_rows)),
            1e-7);
}

// P = V: C holds every class in order, and the sampled loss is the full softmax loss bit for bit (f32, with and
// without the FP8 lm_head of §7.1), gradients included.
TEST(SampledSoftmaxLoss, AllClassesGiveExactlyTheFullSoftmax) {
  for (bool fp8 : {false, true}) {
    Problem p = make_problem(DType::f32, 11);
    CandidateSampler sampler(p.vocab, 1);
    p.candidates = sampler.build(p.targets, p.vocab, 0);
    StepConfig config;
    config.mtp_weights = {1.0f, 0.5f};
    config.prefix_weight = 0.25f;
    config.fp8_lm_head = fp8;
    const LossRun full = run_loss(p, config, false, true, p.h, p.lm_head);
    const LossRun sampled = run_loss(p, config, true, true, p.h, p.lm_head);
    EXPECT_EQ(sampled.loss, full.loss) << "fp8 " << fp8;
    EXPECT_EQ(sampled.dh, full.dh) << "fp8 " << fp8;
    EXPECT_EQ(sampled.dlm_head, full.dlm_head) << "fp8 " << fp8;
  }
}

}  // namespace
}  // namespace gpt::testing
