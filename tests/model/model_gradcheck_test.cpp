// Whole-model gradient against central differences in f64 (RECIPE §2, §3): several coordinates of every
// parameter, on perturbed weights so that the zero-initialised parameters and their paths take part.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "tests/common/gradcheck.h"
#include "tests/common/model_fixtures.h"

namespace gpt::testing {
namespace {

constexpr int64_t kTokens = 48;

Tensor random_prefix_table(int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> token(-1, vocab - 1);
  Tensor t = Tensor::empty({vocab}, DType::i64);
  for (int64_t i = 0; i < vocab; ++i) t.data<int64_t>()[i] = i % 2 == 0 ? -1 : token(rng);
  return t;
}

// Coordinates to check: flat indices that are read by this microbatch (live) and, separately, entries the
// recipe never reads (§2.2 "unused but present"), whose gradient must be exactly zero.
struct Picks {
  std::vector<int64_t> live, unused;
};

class Picker {
 public:
  Picker(const ModelDims& dims, const Microbatch& mb) : dims_(dims), mb_(mb), rng_(99) {}

  // `count` random flat indices in [begin, end) of a tensor viewed as rows of `cols`.
  std::vector<int64_t> in_range(int64_t begin, int64_t end, int count) {
    std::uniform_int_distribution<int64_t> pick(begin, end - 1);
    std::vector<int64_t> out;
    for (int i = 0; i < count; ++i) out.push_back(pick(rng_));
    return out;
  }
  std::vector<int64_t> all(int64_t n) {
    std::vector<int64_t> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  // A random column of the given rows of a [*, cols] table.
  std::vector<int64_t> rows(const std::vector<int64_t>& row_ids, int64_t cols) {
    std::uniform_int_distribution<int64_t> col(0, cols - 1);
    std::vector<int64_t> out;
    for (int64_t r : row_ids) out.push_back(r * cols + col(rng_));
    return out;
  }

  Picks for_parameter(const std::string& name, int64_t numel) {
    const int64_t d = dims_.model_dim, V = dims_.vocab, h = dims_.mudd_hidden, hid = dims_.mlp_hidden;
    const auto& x = mb_.inputs;
    if (name == "embed") return {rows({x[0], x[5], x[20], x[47]}, d), {}};
    if (name == "value_embeds")
      return {rows({0 * V + x[3], 1 * V + x[9], 2 * V + x[17], 3 * V + x[30], 4 * V + x[46], 0 * V + x[0]}, d), {}};
    if (name == "bigram_embed")
      return {rows({mb_.bigram_ids[0], mb_.bigram_ids[1], mb_.bigram_ids[18], mb_.bigram_ids[40]}, d), {}};
    if (name == "qk_bank" || name == "vo_bank") return {in_range(0, numel, 8), {}};
    if (name == "mlp_bank") {
      const int64_t live = 11 * 2 * hid * d;  // slot 11 is padding
      Picks p{in_range(0, live, 8), in_range(live, live + hid * d, 2)};
      return p;
    }
    if (name == "ve_gate_bank") {
      const int64_t per = dims_.num_heads * 12;
      return {in_range(0, 4 * per, 8), in_range(4 * per, 5 * per, 2)};  // ve_gate_bank[4] is unused
    }
    if (name == "scalars") {  // all 24 entries
      Picks p;
      for (int64_t i = 0; i < 24; ++i) (i == 12 || i == 13 ? p.unused : p.live).push_back(i);  // λ of layer 6
      return p;
    }
    if (name == "resid_lambdas" || name == "post_lambdas") {
      Picks p;
      for (int64_t i = 0; i < 22; ++i) {
        if (i == 12 || i >= 20)
          p.unused.push_back(i);  // [6,0] and [10,·]
        else if (i % 2 == (name == "post_lambdas" ? 0 : 1) || i == 13)
          p.live.push_back(i);
      }
      return p;
    }
    if (name == "mudd_w2") {
      Picks p{in_range(0, 14 * h, 6), in_range(14 * h, 19 * h, 4)};
      p.unused = in_range(19 * h, 28 * h, 2);  // mudd_w2[1, 5:14]
      return p;
    }
    if (name == "mudd_b2") {
      Picks p;
      for (int64_t i : {0, 2, 5, 6, 7, 8, 9, 11, 13, 14, 15, 17, 18}) p.live.push_back(i);
      p.unused = {19, 27};  // mudd_b2[1, 5:14]
      return p;
    }
    if (name == "mudd_gate_w2") {
      Picks p{in_range(0, 26 * h, 6), in_range(41 * h, 82 * h, 8)};
      p.unused = in_range(26 * h, 41 * h, 2);  // mudd_gate_w2[0, 26:41]
      return p;
    }
    if (name == "mudd_gate_b2") {
      Picks p;
      for (int64_t i : {0, 7, 13, 18, 19, 24, 25, 41, 48, 53, 59, 60, 63, 68, 69, 70, 75, 79}) p.live.push_back(i);
      p.unused = {26, 40};  // mudd_gate_b2[0, 26:41]
      return p;
    }
    if (numel <= 12) return {all(numel), {}};  // smear_gate, _mudd_gate_scale
    return {in_range(0, numel, 6), {}};        // lm_head, mudd_w1, mudd_gate_w1
  }

 private:
  const ModelDims& dims_;
  const Microbatch& mb_;
  std::mt19937_64 rng_;
};

std::vector<double> at(const std::vector<double>& v, const std::vector<int64_t>& idx) {
  std::vector<double> out;
  for (int64_t i : idx) out.push_back(v[static_cast<size_t>(i)]);
  return out;
}

TEST(ModelGradcheck, EveryParameterMatchesCentralDifferencesInF64) {
  const ModelDims dims = small_dims();
  ModelWeights w = init_weights(dims, 7, DType::f64);
  perturb_weights(w, 11);
  ModelHarness h(std::move(w));
  // Three documents and an empty trailing segment (the last piece has length 1): cu = [0, 17, 37, 48, 48, ...].
  const Microbatch mb = make_microbatch({17, 20, 11, 1}, dims.vocab, dims.bigram_rows, 0, 5);
  ASSERT_EQ(static_cast<int64_t>(mb.inputs.size()), kTokens);
  ASSERT_EQ(mb.cu_seqlens[3], 48);
  ASSERT_EQ(mb.cu_seqlens[4], 48);
  StepConfig cfg = make_config(dims, kTokens, DType::f64, 5, 12, 0.4);
  cfg.mtp_weights = {1.0f};  // the exact gradient; the n > 1 quirk is tested on its own
  cfg.prefix_weight = 0.5f;
  cfg.prefix_table = random_prefix_table(dims.vocab, 3);
  cfg.accumulation_steps = 2;

  Tape tape;
  h.params.zero_grads();
  h.model->train_forward_backward(mb, cfg, tape);
  std::map<std::string, std::vector<double>> analytic;
  for (const Parameter& p : h.params.all()) analytic[p.name] = p.grad.to_doubles();

  // The objective alone (no backward) is the same forward: check that once, then use it for the differences.
  const double with_backward = h.model->train_forward_backward(mb, cfg, tape);
  EXPECT_EQ(with_backward, h.model->training_objective(mb, cfg));
  const auto loss = [&] { return h.model->training_objective(mb, cfg); };
  Picker picker(dims, mb);
  double worst = 0;
  for (Parameter& p : h.params.all()) {
    const Picks picks = picker.for_parameter(p.name, p.value.numel());
    ASSERT_FALSE(picks.live.empty()) << p.name;
    const std::vector<double> numeric = numeric_gradient_at(loss, p.value, picks.live, 1e-5);
    const std::vector<double> exact = at(analytic[p.name], picks.live);
    const double error = max_relative_error(exact, numeric, 1e-6);
    EXPECT_LT(error, 1e-5) << p.name;
    worst = std::max(worst, error);
    double largest = 0;
    for (double g : exact) largest = std::max(largest, std::abs(g));
    EXPECT_GT(largest, 1e-6) << p.name << ": the checked coordinates carry no gradient";
    for (int64_t i : picks.unused)
      EXPECT_EQ(analytic[p.name][static_cast<size_t>(i)], 0.0) << p.name << "[" << i << "]";
    if (!picks.unused.empty()) {
      const std::vector<double> fd_unused = numeric_gradient_at(loss, p.value, picks.unused, 1e-5);
      for (double g : fd_unused) EXPECT_EQ(g, 0.0) << p.name;
    }
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  std::printf("whole-model gradcheck: worst relative error %.3g over %zu parameters\n", worst, h.params.all().size());
}

}  // namespace
}  // namespace gpt::testing
