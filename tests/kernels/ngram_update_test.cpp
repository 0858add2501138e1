// The n-gram table's cycle and event ops (kernels/ngram_update.h, RECIPE §S.2) on the CPU reference: cycle adds
// with the fp16 rounding, the rounding of chosen slots to the exchange dtype, one sparse-Adam row computed by hand,
// lazy replay = eager decay through the ops themselves, and the argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "kernels/ngram_update.h"
#include "tests/common/error_of.h"

namespace gpt {
namespace {

using test::error_of;

Tensor i32(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i32);
  std::memcpy(t.raw(), v.data(), v.size() * sizeof(int32_t));
  return t;
}

TEST(NgramUpdate, CycleAddRoundsEachSumToFp16OnlyWhenAsked) {
  const float x = 1.0f + 0x1p-12f;  // not an fp16 value: rounds to 1
  for (bool round_fp16 : {false, true}) {
    Tensor cycle = Tensor::zeros({3, 2}, DType::f32);
    const Tensor sums = Tensor::from_floats(std::vector<float>{x, 2.0f, -x, 65519.0f}, {2, 2}, DType::f32);
    ngram_cycle_add(cycle, i32({2, 0}), sums, round_fp16);
    const std::vector<float> got = cycle.to_floats();
    // slot 2 <- sums row 0, slot 0 <- sums row 1, slot 1 untouched
    const std::vector<float> want = round_fp16 ? std::vector<float>{-1.0f, 65504.0f, 0, 0, 1.0f, 2.0f}
                                               : std::vector<float>{-x, 65519.0f, 0, 0, x, 2.0f};
    EXPECT_EQ(got, want) << "round_fp16 " << round_fp16;
  }
}

TEST(NgramUpdate, CycleGatherRoundsSlotsToTheOutputDtype) {
  const Tensor cycle =
      Tensor::from_floats(std::vector<float>{1.0f + 0x1p-9f, 3.0f, 0.5f, 1.0f + 0x1p-7f}, {2, 2}, DType::f32);
  Tensor out = Tensor::empty({2, 2}, DType::bf16);
  ngram_cycle_gather(cycle, i32({1, 0}), out);
  EXPECT_EQ(out.to_floats(), (std::vector<float>{0.5f, 1.0f + 0x1p-7f, 1.0f, 3.0f}));  // 1 + 2^-9 rounds to 1
}

// One row of d = 2 by hand: v owes two events (β2 0.5, then 0.25) and then takes this event's (β2 = 0.5).
TEST(NgramUpdate, SparseAdamRowByHand) {
  Tensor table = Tensor::from_floats(std::vector<float>{0, 0, 1.0f, -1.0f}, {2, 2}, DType::f32);
  Tensor moment = Tensor::from_floats(std::vector<float>{0, 4.0f}, {2}, DType::f32);
  Tensor stamps = Tensor::zeros({2}, DType::i64);
  stamps.data<int64_t>()[1] = 1;  // decayed up to event 1; events 2 and 3 passed it by
  const Tensor history = Tensor::from_floats(std::vector<float>{0.9f, 0.5f, 0.25f, 0.5f}, {4}, DType::f32);
  const Tensor grad = Tensor::from_floats(std::vector<float>{3.0f, -3.0f}, {1, 2}, DType::f32);
  NgramAdamStep step;
  step.event = 4;
  step.beta2 = 0.5;
  step.step_scale = 0.5;
  step.decay_scale = 0.25;
  step.eps = 0;
  ngram_sparse_adam(table, moment, stamps, history, i32({1}), grad, step);
  // v = 4·0.5·0.25 = 0.5 owed; then 0.5·0.5 + 0.5·mean(9, 9) = 4.75
  EXPECT_EQ(moment.to_floats(), (std::vector<float>{0, 4.75f}));
  EXPECT_EQ(stamps.data<int64_t>()[1], 4);
  EXPECT_EQ(stamps.data<int64_t>()[0], 0);         // untouched rows keep their stamp
  const float u = 3.0f / std::sqrt(4.75f) * 0.5f;  // u·p > 0 for both columns: decay term 0.25·p added
  const std::vector<float> p = table.to_floats();
  EXPECT_EQ(p[2], 1.0f - (u + 0.25f));
  EXPECT_EQ(p[3], -1.0f - (-u - 0.25f));
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_EQ(p[1], 0.0f);
}

// Through the ops alone: a row skipped for five events (β2 changing midway) and touched again gives the same bits
// with lazy replay as with eager decay.
TEST(NgramUpdate, LazyReplayEqualsEagerDecayBitwise) {
  constexpr int64_t kRows = 3, kDim = 4, kEvents = 7;
  Tensor lazy_table = Tensor::from_floats(std::vector<float>(kRows * kDim, 0.25f), {kRows, kDim}, DType::bf16);
  Tensor eager_table = lazy_table.clone();
  Tensor lazy_v = Tensor::zeros({kRows}, DType::f32), eager_v = Tensor::zeros({kRows}, DType::f32);
  Tensor lazy_stamps = Tensor::zeros({kRows}, DType::i64), eager_stamps = Tensor::zeros({kRows}, DType::i64);
  std::vector<float> history;
  for (int64_t e = 1; e <= kEvents; ++e) {
    const double beta2 = e < 4 ? 0.95 : 0.9025;
    history.push_back(static_cast<float>(beta2));
    const Tensor h = Tensor::from_floats(history, {e}, DType::f32);
    // Row 1 is touched at events 1 and 7 only; rows 0 and 2 every time.
    const std::vector<int32_t> rows =
        e == 1 || e == kEvents ? std::vector<int32_t>{2, 1, 0} : std::vector<int32_t>{0, 2};
    std::vector<float> g(rows.size() * kDim);
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = 0.01f * static_cast<float>((i * 7 + static_cast<size_t>(e)) % 11) - 0.05f;
    const Tensor grad = Tensor::from_floats(g, {static_cast<int64_t>(rows.size()), kDim}, DType::bf16);
    NgramAdamStep step;
    step.event = e;
    step.beta2 = beta2;
    step.step_scale = 0.3 * std::sqrt(1.0 - std::pow(beta2, static_cast<double>(e)));
    step.decay_scale = 0.01;
    step.eps = 1e-10;
    ngram_sparse_adam(lazy_table, lazy_v, lazy_stamps, h, i32(rows), grad, step);
    ngram_sparse_adam(eager_table, eager_v, eager_stamps, h, i32(rows), grad, step);
    ngram_decay_untouched(eager_v, eager_stamps, beta2, e);
  }
  EXPECT_EQ(std::memcmp(lazy_table.raw(), eager_table.raw(), lazy_table.nbytes()), 0);
  EXPECT_EQ(std::memcmp(lazy_v.raw(), eager_v.raw(), lazy_v.nbytes()), 0);
  EXPECT_GT(lazy_v.to_floats()[1], 0.0f);
}

TEST(NgramUpdate, ArgumentErrorsNameTheTensor) {
  Tensor table = Tensor::zeros({4, 2}, DType::f32);
  Tensor moment = Tensor::zeros({4}, DType::f32), stamps = Tensor::zeros({4}, DType::i64);
  const Tensor grad = Tensor::zeros({1, 2}, DType::f32);
  NgramAdamStep step;
  step.event = 3;
  const Tensor short_history = Tensor::zeros({2}, DType::f32);
  EXPECT_NE(error_of([&] {
              ngram_sparse_adam(table, moment, stamps, short_history, i32({0}), grad, step);
            }).find("beta2_history must hold at least 3"),
            std::string::npos);
  const Tensor history = Tensor::zeros({3}, DType::f32);
  Tensor wrong_stamps = Tensor::zeros({4}, DType::i32);
  EXPECT_NE(
      error_of([&] { ngram_sparse_adam(table, moment, wrong_stamps, history, i32({0}), grad, step); }).find("stamps"),
      std::string::npos);
  EXPECT_NE(error_of([&] { ngram_sparse_adam(table, moment, stamps, history, i32({4}), grad, step); }).find("rows"),
            std::string::npos);
  Tensor cycle64 = Tensor::zeros({2, 2}, DType::f64);
  EXPECT_NE(error_of([&] {
              ngram_cycle_add(cycle64, i32({0}), Tensor::zeros({1, 2}, DType::f64), true);
            }).find("fp16 rounding needs an f32 cycle"),
            std::string::npos);
  Tensor out = Tensor::empty({1, 2}, DType::f64);
  EXPECT_NE(error_of([&] {
              ngram_cycle_gather(Tensor::zeros({2, 2}, DType::f32), i32({0}), out);
            }).find("does not round from"),
            std::string::npos);
}

}  // namespace
}  // namespace gpt
