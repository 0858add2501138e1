// CUDA ops of the hashed n-gram table (RECIPE §S.2) against the CPU reference: the embedding forward and its
// per-row backward (kernels/ngram_embed.h), the cycle adds, the rounding to the exchange dtype and the sparse Adam
// with lazily decayed second moments (kernels/ngram_update.h), and a whole NgramTable on CUDA against one on the CPU.
// Every op follows the CPU reference's order and rounding points, so every comparison is bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/bench/zipf_ids.h"
#include "kernels/ngram_embed.h"
#include "kernels/ngram_update.h"
#include "trainer/comm/comm.h"
#include "trainer/data/host_products.h"
#include "trainer/model/ngram_table.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using testing::random_tensor;

constexpr int64_t kVocabTokens = 50257;

// Same shape, dtype and bytes (either tensor on either device).
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
    return ::testing::AssertionFailure() << a.describe() << " vs " << b.describe();
  }
  const Tensor ha = a.to(Device::cpu), hb = b.to(Device::cpu);
  const auto* pa = static_cast<const unsigned char*>(ha.raw());
  const auto* pb = static_cast<const unsigned char*>(hb.raw());
  if (std::memcmp(pa, pb, ha.nbytes()) == 0) return ::testing::AssertionSuccess();
  const size_t esize = dtype_size(a.dtype());
  for (size_t i = 0; i < ha.nbytes(); i += esize) {
    if (std::memcmp(pa + i, pb + i, esize) != 0) {
      return ::testing::AssertionFailure() << "first difference at element " << i / esize << " of " << a.describe();
    }
  }
  return ::testing::AssertionSuccess();
}

Tensor i32_tensor(const std::vector<int32_t>& v, Device device = Device::cpu) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t.to(device);
}

// The sign pool: ±1 (RECIPE §S.2).
Tensor sign_pool(int64_t rows, int64_t d, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(static_cast<size_t>(rows * d));
  for (float& x : v) x = (rng() & 1) ? 1.0f : -1.0f;
  return Tensor::from_floats(v, {rows, d}, dtype);
}

// One microbatch's n-gram products from Zipf-distributed tokens (text-like: frequent bigrams repeat, so rows are hit
// by runs of entries), rows folded into a table of `table_rows` and sign rows into a pool of `pool_rows`.
struct NgramIds {
  std::vector<int32_t> rows, signs;
};

NgramIds text_like_ids(int64_t tokens, int64_t table_rows, int64_t pool_rows, uint64_t seed) {
  const std::vector<int32_t> inputs = zipf_ids(tokens, kVocabTokens, seed);
  NgramIds ids{ngram_row_ids(inputs, table_rows), ngram_sign_rows(inputs)};
  for (int32_t& s : ids.signs) s = static_cast<int32_t>(s % pool_rows);
  return ids;
}

int64_t longest_run(std::vector<int32_t> rows) {
  std::sort(rows.begin(), rows.end());
  int64_t best = 0, run = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    run = i > 0 && rows[i] == rows[i - 1] ? run + 1 : 1;
    best = std::max(best, run);
  }
  return best;
}

struct EmbedCase {
  DType dtype;
  int64_t table_rows, d, tokens, pool_rows;
};

class NgramEmbedCuda : public ::testing::TestWithParam<EmbedCase> {};

TEST_P(NgramEmbedCuda, ForwardAndBackwardMatchCpuBitwise) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, R, d, T, P] = GetParam();
  const NgramIds ids = text_like_ids(T, R, P, 11);
  ASSERT_GT(longest_run(ids.rows), 1) << "the case must hit some row more than once";
  const Tensor table = random_tensor({R, d}, dtype, 12), pool = sign_pool(P, d, dtype, 13);
  const Tensor rows = i32_tensor(ids.rows), signs = i32_tensor(ids.signs);
  const Tensor table_g = gpu(table), pool_g = gpu(pool), rows_g = gpu(rows), signs_g = gpu(signs);

  Tensor out_cpu = Tensor::empty({T, d}, dtype);
  ngram_embed_forward(table, pool, rows, signs, out_cpu);
  Tensor out_gpu = Tensor::empty({T, d}, dtype, Device::cuda);
  poison(out_gpu);
  ngram_embed_forward(table_g, pool_g, rows_g, signs_g, out_gpu);
  EXPECT_TRUE(same_bits(out_gpu, out_cpu)) << "forward";

  // The backward adds: start from non-zero sums.
  const Tensor dout = random_tensor({T, d}, dtype, 14);
  Tensor grad_cpu = random_tensor({R, d}, stat_dtype(dtype), 15);
  Tensor grad_gpu = gpu(grad_cpu), grad_again = gpu(grad_cpu);
  ngram_embed_backward(dout, pool, rows, signs, grad_cpu);
  const Tensor dout_g = gpu(dout);
  ngram_embed_backward(dout_g, pool_g, rows_g, signs_g, grad_gpu);
  ngram_embed_backward(dout_g, pool_g, rows_g, signs_g, grad_again);
  EXPECT_TRUE(same_bits(grad_gpu, grad_cpu)) << "backward";
  EXPECT_TRUE(same_bits(grad_gpu, grad_again)) << "backward must be deterministic";
}

// Small shapes in every dtype (d = 13: the unpacked path), an `ext` microbatch of stage 0 and `mini-ext`'s
// largest microbatch (T = 49,152, d = 768, the 8192-row pool) with the table reduced to 2^18 rows.
INSTANTIATE_TEST_SUITE_P(Shapes, NgramEmbedCuda,
                         ::testing::Values(EmbedCase{DType::f64, 64, 24, 50, 16}, EmbedCase{DType::f32, 64, 24, 50, 16},
                                           EmbedCase{DType::bf16, 64, 24, 50, 16},
                                           EmbedCase{DType::bf16, 64, 13, 37, 16},
                                           EmbedCase{DType::bf16, 1 << 17, 768, 16384, 8192},
                                           EmbedCase{DType::bf16, 1 << 18, 768, 49152, 8192}));

// Ids outside the table (bad input the CPU reference refuses): the forward writes NaN for their tokens, the backward
// skips their entries. The CPU side sends those entries to a sink row no other entry hits instead.
TEST(NgramEmbedCuda, IdsOutsideTheTableGiveNanTokensAndSkippedEntries) {
  GPT_REQUIRE_CUDA_DEVICE();
  constexpr int64_t R = 64, d = 16, T = 20, P = 8, kSink = R - 1;
  std::vector<int32_t> rows(2 * T), signs(2 * T);
  std::mt19937_64 rng(61);
  for (int32_t& r : rows) r = static_cast<int32_t>(rng() % kSink);
  for (int32_t& s : signs) s = static_cast<int32_t>(rng() % P);
  std::vector<int32_t> bad_rows = rows, sink_rows = rows;
  bad_rows[5] = -1;     // bigram entry of token 5
  bad_rows[T + 3] = R;  // trigram entry of token 3
  sink_rows[5] = sink_rows[T + 3] = kSink;
  const Tensor table = random_tensor({R, d}, DType::f32, 62), pool = sign_pool(P, d, DType::f32, 63);
  const Tensor sign_cpu = i32_tensor(signs), sign_gpu = gpu(sign_cpu);

  Tensor out_cpu = Tensor::empty({T, d}, DType::f32);
  ngram_embed_forward(table, pool, i32_tensor(sink_rows), sign_cpu, out_cpu);
  Tensor out_gpu = Tensor::zeros({T, d}, DType::f32, Device::cuda);
  ngram_embed_forward(gpu(table), gpu(pool), i32_tensor(bad_rows, Device::cuda), sign_gpu, out_gpu);
  const std::vector<float> got = out_gpu.to_floats(), want = out_cpu.to_floats();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < d; ++c) {
      const float g = got[static_cast<size_t>(t * d + c)];
      if (t == 3 || t == 5) {
        ASSERT_TRUE(std::isnan(g)) << "token " << t;
      } else {
        ASSERT_EQ(g, want[static_cast<size_t>(t * d + c)]) << "token " << t;
      }
    }
  }

  const Tensor dout = random_tensor({T, d}, DType::f32, 64);
  Tensor grad_cpu = Tensor::zeros({R, d}, DType::f32), grad_gpu = Tensor::zeros({R, d}, DType::f32, Device::cuda);
  ngram_embed_backward(dout, pool, i32_tensor(sink_rows), sign_cpu, grad_cpu);
  ngram_embed_backward(gpu(dout), gpu(pool), i32_tensor(bad_rows, Device::cuda), sign_gpu, grad_gpu);
  EXPECT_TRUE(same_bits(grad_gpu.slice(0, kSink), grad_cpu.slice(0, kSink).clone()));
  for (float g : grad_gpu.slice(kSink, R).to_floats()) EXPECT_EQ(g, 0.0f) << "the skipped entries' row";
}

// Cycle adds (with and without the fp16 rounding, values past fp16's range included) and the rounding of chosen
// slots to the exchange dtype.
TEST(NgramUpdateCuda, CycleAddAndGatherMatchCpuBitwise) {
  GPT_REQUIRE_CUDA_DEVICE();
  constexpr int64_t kSlots = 40, kDim = 768, kUsed = 25;
  std::vector<int32_t> slots(kSlots);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(3));
  slots.resize(kUsed);
  const Tensor slots_cpu = i32_tensor(slots), slots_gpu = gpu(slots_cpu);
  for (DType cycle_dtype : {DType::f32, DType::f64}) {
    for (bool round_fp16 : {false, true}) {
      if (round_fp16 && cycle_dtype != DType::f32) continue;
      Tensor cycle_cpu = random_tensor({kSlots, kDim}, cycle_dtype, 4, 100.0);
      Tensor sums = random_tensor({kUsed, kDim}, cycle_dtype, 5, 3e4);  // some sums pass 65504
      Tensor cycle_gpu = gpu(cycle_cpu);
      for (int pass = 0; pass < 3; ++pass) {
        ngram_cycle_add(cycle_cpu, slots_cpu, sums, round_fp16);
        ngram_cycle_add(cycle_gpu, slots_gpu, gpu(sums), round_fp16);
      }
      EXPECT_TRUE(same_bits(cycle_gpu, cycle_cpu)) << dtype_name(cycle_dtype) << " fp16 " << round_fp16;
      const std::vector<DType> outs =
          cycle_dtype == DType::f64 ? std::vector<DType>{DType::f64} : std::vector<DType>{DType::f32, DType::bf16};
      for (DType out_dtype : outs) {
        Tensor out_cpu = Tensor::empty({kUsed, kDim}, out_dtype);
        Tensor out_gpu = Tensor::empty({kUsed, kDim}, out_dtype, Device::cuda);
        poison(out_gpu);
        ngram_cycle_gather(cycle_cpu, slots_cpu, out_cpu);
        ngram_cycle_gather(cycle_gpu, slots_gpu, out_gpu);
        EXPECT_TRUE(same_bits(out_gpu, out_cpu)) << dtype_name(cycle_dtype) << " to " << dtype_name(out_dtype);
      }
    }
  }
}

// The state of one sparse-Adam run (table, second moment, stamps) on one device.
struct AdamState {
  Tensor table, moment, stamps;
};

// Ten events (β2 0.95, then 0.9025 from event 6) on 300 rows: CUDA lazy = CPU lazy and CUDA eager = CPU eager after
// every event; lazy and eager tables agree bitwise, and so do their second moments once the lazy ones are settled.
// Row 7 is touched at events 1 and 9 only (it owes seven decays, across the β2 change), row 8 never.
class NgramSparseAdamCuda : public ::testing::TestWithParam<DType> {};

TEST_P(NgramSparseAdamCuda, MatchesCpuLazyAndEagerOverEvents) {
  GPT_REQUIRE_CUDA_DEVICE();
  const DType dtype = GetParam();
  constexpr int64_t kRows = 300, kDim = 768, kEvents = 10;
  const Tensor start = random_tensor({kRows, kDim}, dtype, 21, 0.05);
  auto fresh = [&](Device device) {
    return AdamState{start.to(device).clone(), Tensor::zeros({kRows}, DType::f32, device),
                     Tensor::zeros({kRows}, DType::i64, device)};
  };
  AdamState lazy_cpu = fresh(Device::cpu), lazy_gpu = fresh(Device::cuda);
  AdamState eager_cpu = fresh(Device::cpu), eager_gpu = fresh(Device::cuda);
  std::vector<float> history;
  std::mt19937_64 rng(22);
  for (int64_t e = 1; e <= kEvents; ++e) {
    const double beta2 = e <= 5 ? 0.95 : 0.95 * 0.95;
    history.push_back(static_cast<float>(beta2));
    const Tensor history_cpu = Tensor::from_floats(history, {e}, DType::f32), history_gpu = gpu(history_cpu);
    std::vector<int32_t> rows;
    for (int32_t r = 0; r < kRows; ++r) {
      const bool touched = r == 7 ? (e == 1 || e == 9) : r != 8 && rng() % 10 < 3;
      if (touched) rows.push_back(r);
    }
    std::shuffle(rows.begin(), rows.end(), rng);  // the op takes distinct rows in any order
    const auto n = static_cast<int64_t>(rows.size());
    const Tensor grad = random_tensor({n, kDim}, dtype, static_cast<uint64_t>(100 + e), 1e-3 * static_cast<double>(e));
    const Tensor rows_cpu = i32_tensor(rows), rows_gpu = gpu(rows_cpu), grad_gpu = gpu(grad);
    NgramAdamStep step;
    step.event = e;
    step.beta2 = beta2;
    const double lr = 0.008 * 70 * (1.0 - 0.05 * static_cast<double>(e));
    step.step_scale = lr * std::sqrt(1.0 - std::pow(beta2, static_cast<double>(e)));
    step.decay_scale = lr * lr * 0.005 * (e <= 5 ? 5 : 10);
    step.eps = 1e-10;
    for (AdamState* s : {&lazy_cpu, &eager_cpu}) {
      ngram_sparse_adam(s->table, s->moment, s->stamps, history_cpu, rows_cpu, grad, step);
    }
    for (AdamState* s : {&lazy_gpu, &eager_gpu}) {
      ngram_sparse_adam(s->table, s->moment, s->stamps, history_gpu, rows_gpu, grad_gpu, step);
    }
    ngram_decay_untouched(eager_cpu.moment, eager_cpu.stamps, beta2, e);
    ngram_decay_untouched(eager_gpu.moment, eager_gpu.stamps, beta2, e);
    for (auto [gpu_state, cpu_state, what] :
         {std::tuple{&lazy_gpu, &lazy_cpu, "lazy"}, std::tuple{&eager_gpu, &eager_cpu, "eager"}}) {
      EXPECT_TRUE(same_bits(gpu_state->table, cpu_state->table)) << what << " table after event " << e;
      EXPECT_TRUE(same_bits(gpu_state->moment, cpu_state->moment)) << what << " second moment after event " << e;
      EXPECT_TRUE(same_bits(gpu_state->stamps, cpu_state->stamps)) << what << " stamps after event " << e;
    }
    EXPECT_TRUE(same_bits(lazy_gpu.table, eager_gpu.table)) << "lazy vs eager table after event " << e;
  }
  // Settle the lazy moments (what each row still owes) and compare with the eager ones.
  const Tensor moment = lazy_gpu.moment.to(Device::cpu), stamps = lazy_gpu.stamps.to(Device::cpu);
  const std::vector<float> eager = eager_gpu.moment.to_floats();
  int64_t owing = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    float v = moment.data<float>()[r];
    owing += stamps.data<int64_t>()[r] < kEvents;
    for (int64_t k = stamps.data<int64_t>()[r] + 1; k <= kEvents; ++k) v = history[static_cast<size_t>(k - 1)] * v;
    EXPECT_EQ(std::memcmp(&v, &eager[static_cast<size_t>(r)], sizeof(float)), 0) << "row " << r;
  }
  EXPECT_GT(owing, 10) << "the case must leave rows untouched at the last event";
  EXPECT_GT(eager[7], 0.0f);
  EXPECT_EQ(eager[8], 0.0f);
  EXPECT_FALSE(same_bits(lazy_gpu.table, gpu(start))) << "the events must move the table";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NgramSparseAdamCuda, ::testing::Values(DType::bf16, DType::f32, DType::f64));

NgramTableOptions table_options(int64_t rows, int64_t dim, DType dtype, bool eager = false) {
  NgramTableOptions o;
  o.rows = rows;
  o.dim = dim;
  o.dtype = dtype;
  o.late_step = 3;  // events before and after the phase change
  o.eager_decay = eager;
  return o;
}

// Cycles of `cycle_sizes` microbatches of T tokens through a CPU table and a CUDA table (and a CUDA table with eager
// decay): every forward, the pending cycle and, after the events, shard and settled second moment agree bitwise.
void compare_tables(int64_t rows, int64_t dim, int64_t tokens, DType dtype, const std::vector<int>& cycle_sizes) {
  constexpr int64_t kPoolRows = 8192;
  auto comm = make_single_rank_comm();
  const Tensor pool = sign_pool(kPoolRows, dim, dtype, 31);
  NgramTable host(table_options(rows, dim, dtype), pool, *comm);
  NgramTable device(table_options(rows, dim, dtype), gpu(pool), *comm);
  NgramTable device_eager(table_options(rows, dim, dtype, true), gpu(pool), *comm);
  uint64_t seed = 40;
  for (size_t step = 0; step < cycle_sizes.size(); ++step) {
    for (int k = 0; k < cycle_sizes[step]; ++k) {
      const NgramIds ids = text_like_ids(tokens, rows, kPoolRows, seed++);
      const Tensor expected = host.forward(ids.rows, ids.signs);
      EXPECT_TRUE(same_bits(device.forward(ids.rows, ids.signs), expected)) << "forward at step " << step;
      EXPECT_TRUE(same_bits(device_eager.forward(ids.rows, ids.signs), expected)) << "eager forward, step " << step;
      const Tensor dout = random_tensor({tokens, dim}, dtype, seed++);
      host.accumulate_backward(ids.rows, ids.signs, dout);
      device.accumulate_backward(ids.rows, ids.signs, gpu(dout));
      device_eager.accumulate_backward(ids.rows, ids.signs, gpu(dout));
    }
    const double lr_mult = 1.0 - 0.1 * static_cast<double>(step);
    if (step + 1 == cycle_sizes.size()) {
      // The pending cycle before the last event, as a checkpoint holds it.
      const std::vector<NamedTensor> a = host.checkpoint_tensors(), b = device.checkpoint_tensors();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(b[i].tensor, a[i].tensor)) << a[i].name;
    }
    for (NgramTable* t : {&host, &device, &device_eager}) t->apply_event(static_cast<int64_t>(step), lr_mult);
  }
  EXPECT_TRUE(same_bits(device.shard(), host.shard())) << "shard";
  EXPECT_TRUE(same_bits(device_eager.shard(), host.shard())) << "shard with eager decay";
  const std::vector<float> moment = host.settled_second_moment();
  EXPECT_EQ(device.settled_second_moment(), moment);
  EXPECT_EQ(device_eager.settled_second_moment(), moment);
  EXPECT_GT(std::count_if(moment.begin(), moment.end(), [](float v) { return v > 0; }), 100)
      << "the events must have updated rows";
}

TEST(NgramTableCuda, MatchesCpuTableBitwise) {
  GPT_REQUIRE_CUDA_DEVICE();
  for (DType dtype : {DType::bf16, DType::f32}) compare_tables(4096, 64, 512, dtype, {1, 2, 1, 3, 1, 2});
}

// `mini-ext`'s stage-0 microbatch (T = 16,384, d = 768, bf16) with the table reduced to 2^20 rows (1.5 GB).
TEST(NgramTableCuda, MiniSeedShapeMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  compare_tables(1 << 20, 768, 16384, DType::bf16, {2, 1, 2, 1});
}

}  // namespace
}  // namespace gpt
