// NgramTable (§S.2): sparse Adam against a dense f64 computation, lazy = eager decay bitwise, W = 2 = W = 1,
// checkpoint round trip mid-cycle, reset, fp16 rounding of the cycle.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "base/check.h"
#include "trainer/comm/comm.h"
#include "trainer/data/host_products.h"
#include "trainer/model/ngram_table.h"
#include "tests/common/thread_ranks.h"

namespace gpt {
namespace {

constexpr int64_t kRows = 64, kDim = 8, kPoolRows = 16, kTokens = 6;

NgramTableOptions small_options(DType dtype, bool eager = false) {
  NgramTableOptions o;
  o.rows = kRows;
  o.dim = kDim;
  o.dtype = dtype;
  o.late_step = 3;  // events before and after the phase change
  o.eager_decay = eager;
  return o;
}

Tensor make_pool(DType dtype) {
  std::mt19937_64 rng(99);
  std::vector<float> v(static_cast<size_t>(kPoolRows * kDim));
  for (float& x : v) x = (rng() & 1) ? 1.0f : -1.0f;
  return Tensor::from_floats(v, {kPoolRows, kDim}, dtype);
}

// A microbatch's n-gram products (rows in [0, 64), sign rows folded into the small pool) and an upstream gradient.
struct Batch {
  std::vector<int32_t> rows, signs;
  std::vector<float> dout;  // [T, d]
};

Batch make_batch(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> tokens(kTokens);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 50304);
  Batch b;
  b.rows = ngram_row_ids(tokens, kRows);
  b.signs = ngram_sign_rows(tokens);
  for (int32_t& s : b.signs) s %= kPoolRows;
  std::normal_distribution<float> normal;
  b.dout.resize(static_cast<size_t>(kTokens * kDim));
  for (float& g : b.dout) g = normal(rng);
  return b;
}

Tensor dout_tensor(const Batch& b, DType dtype, float scale = 1.0f) {
  std::vector<float> v = b.dout;
  for (float& g : v) g *= scale;
  return Tensor::from_floats(v, {kTokens, kDim}, dtype);
}

double lr_mult_at(int64_t step) { return 1.0 - 0.1 * static_cast<double>(step); }

// Independent dense f64 reference of the sparse Adam: every row's v decays every event, touched rows update.
struct DenseReference {
  std::vector<double> p = std::vector<double>(kRows * kDim, 0.0);
  std::vector<double> v = std::vector<double>(kRows, 0.0);
  std::vector<double> cycle = std::vector<double>(kRows * kDim, 0.0);
  std::set<int32_t> touched;
  std::vector<float> pool;
  int64_t events = 0;

  void accumulate(const Batch& b) {
    for (int64_t j = 0; j < 2 * kTokens; ++j) {
      const int32_t row = b.rows[static_cast<size_t>(j)];
      touched.insert(row);
      for (int64_t c = 0; c < kDim; ++c) {
        cycle[static_cast<size_t>(row * kDim + c)] +=
            static_cast<double>(b.dout[static_cast<size_t>((j % kTokens) * kDim + c)]) *
            pool[static_cast<size_t>(b.signs[static_cast<size_t>(j)] * kDim + c)];
      }
    }
  }
  void event(int64_t step, const NgramTableOptions& o) {
    const bool late = step >= o.late_step;
    const double beta = late ? o.beta2 * o.beta2 : o.beta2, wd_mul = late ? o.wd_mul_late : o.wd_mul_early;
    const double lr = o.lr * lr_mult_at(step) * o.lr_mul;
    ++events;
    for (int32_t row = 0; row < kRows; ++row) {
      if (!touched.count(row)) {
        v[static_cast<size_t>(row)] *= beta;
        continue;
      }
      double msq = 0;
      for (int64_t c = 0; c < kDim; ++c) msq += std::pow(cycle[static_cast<size_t>(row * kDim + c)], 2);
      double& vr = v[static_cast<size_t>(row)];
      vr = beta * vr + (1 - beta) * msq / kDim;
      for (int64_t c = 0; c < kDim; ++c) {
        double& pc = p[static_cast<size_t>(row * kDim + c)];
        double u = cycle[static_cast<size_t>(row * kDim + c)] / (std::sqrt(vr) + o.eps) * lr *
                   std::sqrt(1 - std::pow(beta, static_cast<double>(events)));
        if (u * pc > 0) u += lr * lr * o.wd * wd_mul * pc;
        pc -= u;
      }
    }
    std::fill(cycle.begin(), cycle.end(), 0.0);
    touched.clear();
  }
};

// Cycles of 1, 2, 1, 3, 1, 2 microbatches; events at steps 0..5 (late phase from step 3).
const std::vector<int> kCycleSizes{1, 2, 1, 3, 1, 2};

void compare_with_reference(DType dtype, double tolerance) {
  auto comm = make_single_rank_comm();
  const NgramTableOptions options = small_options(dtype);
  NgramTable table(options, make_pool(dtype), *comm);
  DenseReference ref;
  ref.pool = make_pool(DType::f32).to_floats();
  uint64_t seed = 1;
  std::set<int32_t> ever_touched;
  for (size_t step = 0; step < kCycleSizes.size(); ++step) {
    for (int k = 0; k < kCycleSizes[step]; ++k) {
      const Batch b = make_batch(seed++);
      // The forward reads the reference's current rows.
      const std::vector<double> y = table.forward(b.rows, b.signs).to_doubles();
      for (int64_t t = 0; t < kTokens; ++t) {
        for (int64_t c = 0; c < kDim; ++c) {
          double expected = 0;
          for (int64_t j : {t, kTokens + t}) {
            expected += ref.p[static_cast<size_t>(b.rows[static_cast<size_t>(j)] * kDim + c)] *
                        ref.pool[static_cast<size_t>(b.signs[static_cast<size_t>(j)] * kDim + c)];
          }
          ASSERT_NEAR(y[static_cast<size_t>(t * kDim + c)], expected, tolerance * (1 + std::abs(expected)));
        }
      }
      table.accumulate_backward(b.rows, b.signs, dout_tensor(b, dtype));
      ref.accumulate(b);
      ever_touched.insert(b.rows.begin(), b.rows.end());
    }
    EXPECT_EQ(table.cycle_rows(), std::vector<int32_t>(ref.touched.begin(), ref.touched.end()));
    table.apply_event(static_cast<int64_t>(step), lr_mult_at(static_cast<int64_t>(step)));
    ref.event(static_cast<int64_t>(step), options);
  }
  EXPECT_EQ(table.events(), static_cast<int64_t>(kCycleSizes.size()));
  EXPECT_LT(ever_touched.size(), static_cast<size_t>(kRows));  // some rows never touched: they must stay 0
  const std::vector<double> p = table.shard().to_doubles();
  const std::vector<float> v = table.settled_second_moment();
  double largest = 0;
  for (int64_t i = 0; i < kRows * kDim; ++i) {
    EXPECT_NEAR(p[static_cast<size_t>(i)], ref.p[static_cast<size_t>(i)],
                tolerance * (1 + std::abs(ref.p[static_cast<size_t>(i)])))
        << "entry " << i;
    largest = std::max(largest, std::abs(ref.p[static_cast<size_t>(i)]));
  }
  EXPECT_GT(largest, 0.5);  // the updates are of the order of lr_ng = 0.56
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_NEAR(v[static_cast<size_t>(r)], ref.v[static_cast<size_t>(r)], 1e-5 * ref.v[static_cast<size_t>(r)] + 1e-30)
        << "row " << r;
  }
}

TEST(NgramTable, SparseAdamMatchesDenseF64Reference) {
  compare_with_reference(DType::f64, 1e-6);
  compare_with_reference(DType::f32, 1e-4);
}

// Runs the cycles of kCycleSizes on one table; returns it for inspection.
void run_cycles(NgramTable& table, DType dtype, uint64_t first_seed = 1) {
  uint64_t seed = first_seed;
  for (size_t step = 0; step < kCycleSizes.size(); ++step) {
    for (int k = 0; k < kCycleSizes[step]; ++k) {
      const Batch b = make_batch(seed++);
      (void)table.forward(b.rows, b.signs);
      table.accumulate_backward(b.rows, b.signs, dout_tensor(b, dtype));
    }
    table.apply_event(static_cast<int64_t>(step), lr_mult_at(static_cast<int64_t>(step)));
  }
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(NgramTable, LazyDecayIsBitwiseEagerDecay) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    auto comm = make_single_rank_comm();
    NgramTable lazy(small_options(dtype, false), make_pool(dtype), *comm);
    NgramTable eager(small_options(dtype, true), make_pool(dtype), *comm);
    run_cycles(lazy, dtype);
    run_cycles(eager, dtype);
    // A row untouched for several events and touched again: its replayed decay fed the last update.
    EXPECT_TRUE(same_bits(lazy.shard(), eager.shard())) << dtype_name(dtype);
    const std::vector<float> a = lazy.settled_second_moment(), b = eager.settled_second_moment();
    ASSERT_EQ(a.size(), b.size());
    int positive = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << "row " << i << ": " << a[i] << " vs " << b[i];
      positive += a[i] > 0;
    }
    EXPECT_GT(positive, 10);
  }
}

TEST(NgramTable, CycleOfBf16TableAccumulatesInFp16) {
  EXPECT_EQ(round_to_fp16(1.0f + 0x1p-11f), 1.0f);  // tie to even
  EXPECT_EQ(round_to_fp16(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);
  EXPECT_EQ(round_to_fp16(0.1f), 0.0999755859375f);
  EXPECT_EQ(round_to_fp16(-0.1f), -0.0999755859375f);
  EXPECT_EQ(round_to_fp16(65519.0f), 65504.0f);
  EXPECT_TRUE(std::isinf(round_to_fp16(65520.0f)));
  EXPECT_EQ(round_to_fp16(0x1p-24f), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(round_to_fp16(0x1p-25f), 0.0f);
  EXPECT_EQ(round_to_fp16(3 * 0x1p-25f), 0x1p-23f);
  // The pending cycle of a bf16 table holds fp16 values.
  auto comm = make_single_rank_comm();
  NgramTable table(small_options(DType::bf16), make_pool(DType::bf16), *comm);
  for (uint64_t s = 1; s <= 3; ++s) {
    const Batch b = make_batch(s);
    table.accumulate_backward(b.rows, b.signs, dout_tensor(b, DType::bf16, 1.0f / 3));
  }
  for (const NamedTensor& t : table.checkpoint_tensors()) {
    if (t.name != "ngram/cycle_grad") continue;
    for (float g : t.tensor.to_floats()) EXPECT_EQ(g, round_to_fp16(g));
  }
}

TEST(NgramTable, CheckpointMidCycleRoundTripsBitExactly) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    auto comm = make_single_rank_comm();
    NgramTable original(small_options(dtype), make_pool(dtype), *comm);
    run_cycles(original, dtype);
    const Batch pending = make_batch(500), later = make_batch(501), probe = make_batch(502);
    original.accumulate_backward(pending.rows, pending.signs, dout_tensor(pending, dtype));
    const std::vector<NamedTensor> saved = original.checkpoint_tensors();

    NgramTable resumed(small_options(dtype), make_pool(dtype), *comm);
    run_cycles(resumed, dtype, 77);  // some other history, overwritten by the restore
    resumed.accumulate_backward(later.rows, later.signs, dout_tensor(later, dtype));
    resumed.restore_checkpoint(saved);
    EXPECT_EQ(resumed.cycle_rows(), original.cycle_rows());

    for (NgramTable* t : {&original, &resumed}) {
      t->accumulate_backward(later.rows, later.signs, dout_tensor(later, dtype));
      t->apply_event(8, 0.5);
    }
    EXPECT_TRUE(same_bits(original.shard(), resumed.shard())) << dtype_name(dtype);
    EXPECT_EQ(original.settled_second_moment(), resumed.settled_second_moment());
    EXPECT_EQ(original.events(), resumed.events());
    EXPECT_TRUE(same_bits(original.forward(probe.rows, probe.signs), resumed.forward(probe.rows, probe.signs)));
  }
}

TEST(NgramTable, CheckpointRejectsMissingOrMisshapedTensors) {
  auto comm = make_single_rank_comm();
  NgramTable table(small_options(DType::f32), make_pool(DType::f32), *comm);
  std::vector<NamedTensor> saved = table.checkpoint_tensors();
  std::vector<NamedTensor> missing(saved.begin() + 1, saved.end());
  EXPECT_THROW(table.restore_checkpoint(missing), Error);
  for (NamedTensor& t : saved) {
    if (t.name == "ngram/shard") t.tensor = Tensor::zeros({kRows, kDim + 1}, DType::f32);
  }
  EXPECT_THROW(table.restore_checkpoint(saved), Error);
}

TEST(NgramTable, ResetZeroesStateAndDropsTheCycle) {
  auto comm = make_single_rank_comm();
  NgramTable table(small_options(DType::f32), make_pool(DType::f32), *comm);
  run_cycles(table, DType::f32);
  const Batch b = make_batch(3);
  table.accumulate_backward(b.rows, b.signs, dout_tensor(b, DType::f32));
  table.reset();
  EXPECT_EQ(table.events(), 0);
  EXPECT_TRUE(table.cycle_rows().empty());
  for (double x : table.shard().to_doubles()) ASSERT_EQ(x, 0.0);
  for (float x : table.settled_second_moment()) ASSERT_EQ(x, 0.0f);
  // After the reset the same run gives the same bits as a fresh table.
  NgramTable fresh(small_options(DType::f32), make_pool(DType::f32), *comm);
  run_cycles(table, DType::f32);
  run_cycles(fresh, DType::f32);
  EXPECT_TRUE(same_bits(table.shard(), fresh.shard()));
}

TEST(NgramTable, DropCycleForgetsThePendingGradient) {
  auto comm = make_single_rank_comm();
  NgramTable table(small_options(DType::f32), make_pool(DType::f32), *comm);
  const Batch b = make_batch(4);
  table.accumulate_backward(b.rows, b.signs, dout_tensor(b, DType::f32));
  table.drop_cycle();
  table.apply_event(0, 1.0);
  for (double x : table.shard().to_doubles()) ASSERT_EQ(x, 0.0);
}

TEST(NgramTable, RejectsMicrobatchWithoutNgramProducts) {
  auto comm = make_single_rank_comm();
  NgramTable table(small_options(DType::f32), make_pool(DType::f32), *comm);
  Microbatch mb;
  mb.inputs = {1, 2, 3};
  try {
    (void)table.forward(mb);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ngram_rows"), std::string::npos) << e.what();
  }
  EXPECT_THROW(NgramTable(small_options(DType::f32), make_pool(DType::bf16), *comm), Error);
  NgramTableOptions odd = small_options(DType::f32);
  odd.rows = 63;
  EXPECT_THROW(NgramTable(odd, make_pool(DType::f32), *comm), Error);
}

// W = 2 thread ranks, one microbatch each per step, against W = 1 with both microbatches per step (loss scale 1/2):
// forwards, shards and second moments agree bitwise (events every step; a power-of-two W keeps the average exact).
TEST(NgramTable, TwoRanksEqualOneRank) {
  constexpr int kEvents = 5;
  const DType dtype = DType::f32;
  auto single = make_single_rank_comm();
  NgramTable one(small_options(dtype), make_pool(dtype), *single);
  std::vector<std::vector<Tensor>> one_outputs(2);
  for (int step = 0; step < kEvents; ++step) {
    for (int r = 0; r < 2; ++r) {
      const Batch b = make_batch(static_cast<uint64_t>(100 * step + r));
      one_outputs[static_cast<size_t>(r)].push_back(one.forward(b.rows, b.signs));
      one.accumulate_backward(b.rows, b.signs, dout_tensor(b, dtype, 0.5f));
    }
    one.apply_event(step, lr_mult_at(step));
  }

  std::vector<std::vector<Tensor>> outputs(2);
  std::vector<Tensor> shards(2);
  std::vector<std::vector<float>> moments(2);
  test::run_thread_ranks(2, [&](int r, Comm& comm) {
    NgramTable table(small_options(dtype), make_pool(dtype), comm);
    for (int step = 0; step < kEvents; ++step) {
      const Batch b = make_batch(static_cast<uint64_t>(100 * step + r));
      outputs[static_cast<size_t>(r)].push_back(table.forward(b.rows, b.signs));
      table.accumulate_backward(b.rows, b.signs, dout_tensor(b, dtype));
      table.apply_event(step, lr_mult_at(step));
    }
    shards[static_cast<size_t>(r)] = table.shard().clone();
    moments[static_cast<size_t>(r)] = table.settled_second_moment();
  });
  const int64_t half = kRows / 2;
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(same_bits(shards[static_cast<size_t>(r)], one.shard().slice(r * half, (r + 1) * half).clone()))
        << "shard of rank " << r;
    const std::vector<float> all = one.settled_second_moment();
    const std::vector<float> part(all.begin() + r * half, all.begin() + (r + 1) * half);
    EXPECT_EQ(moments[static_cast<size_t>(r)], part) << "second moment of rank " << r;
    for (int step = 0; step < kEvents; ++step) {
      EXPECT_TRUE(same_bits(outputs[static_cast<size_t>(r)][static_cast<size_t>(step)],
                            one_outputs[static_cast<size_t>(r)][static_cast<size_t>(step)]))
          << "forward of rank " << r << " at step " << step;
    }
  }
  double largest = 0;
  for (double x : one.shard().to_doubles()) largest = std::max(largest, std::abs(x));
  EXPECT_GT(largest, 0.1);  // rows of both halves were updated and read back
}

}  // namespace
}  // namespace gpt
