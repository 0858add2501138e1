// CUDA column gather and scatter-add (kernels/column_select.h, RECIPE §S.4) against the CPU reference: copies and
// single adds, so bit for bit. Small cases with repeated and unsorted columns (the in-order path), and lm_head of the
// `ext` / `mini-ext` profiles (768 × 50304) with the stage sizes P = 10240, 14336, 24576 of sorted distinct columns
// (the candidate sets: the parallel path). Gather outputs are NaN-poisoned first. The whole sampled head (gather,
// loss over C, scatter of the gradient) runs in tests/gpu/model_cuda_test.cpp (ModelCuda.SampledSoftmax*).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/column_select.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt {
namespace {

using gpu_testing::bit_mismatches;
using gpu_testing::poison;

constexpr int64_t kModelDim = 768, kVocab = 50304;
constexpr int64_t kStageSizes[] = {10240, 14336, 24576};

Tensor columns_tensor(const std::vector<int64_t>& c) {
  Tensor t = Tensor::empty({static_cast<int64_t>(c.size())}, DType::i64);
  std::copy(c.begin(), c.end(), t.data<int64_t>());
  return t;
}

// `count` distinct columns of [0, vocab), sorted ascending (a candidate set's form).
std::vector<int64_t> sorted_distinct(int64_t vocab, int64_t count, uint64_t seed) {
  std::vector<int64_t> all(static_cast<size_t>(vocab));
  std::iota(all.begin(), all.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(count));
  std::sort(all.begin(), all.end());
  return all;
}

struct Case {
  int64_t rows, vocab;
  std::vector<int64_t> columns;
};

std::vector<Case> cases() {
  std::vector<Case> out = {
      {5, 37, {36, 0, 5, 5, 12, 0, 36, 1}},   // unsorted, repeats apart and adjacent
      {3, 9, {2, 2, 2, 4, 7}},                // sorted with a run of repeats
      {4, 300, sorted_distinct(300, 77, 1)},  // sorted distinct, width not a multiple of the block
  };
  for (int64_t p : kStageSizes) out.push_back({kModelDim, kVocab, sorted_distinct(kVocab, p, 100 + p)});
  return out;
}

class ColumnSelectCuda : public ::testing::TestWithParam<DType> {};

TEST_P(ColumnSelectCuda, GatherIsBitExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Case& c : cases()) {
    const Tensor table = testing::random_tensor({c.rows, c.vocab}, dtype, 1);
    const Tensor columns = columns_tensor(c.columns);
    const int64_t width = columns.size(0);
    Tensor out_cpu = Tensor::empty({c.rows, width}, dtype);
    Tensor out_gpu = Tensor::empty({c.rows, width}, dtype, Device::cuda);
    poison(out_gpu);
    column_gather(table, columns, out_cpu);
    column_gather(table.to(Device::cuda), columns.to(Device::cuda), out_gpu);
    EXPECT_EQ(bit_mismatches(out_gpu, out_cpu), 0) << c.rows << "×" << c.vocab << " P = " << width;
  }
}

// Adds into a random table (so each add rounds), twice in a row (the second add reads the first one's result).
TEST_P(ColumnSelectCuda, ScatterAddIsBitExact) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  for (const Case& c : cases()) {
    const Tensor columns = columns_tensor(c.columns);
    const int64_t width = columns.size(0);
    const Tensor src = testing::random_tensor({c.rows, width}, dtype, 2, 0.3);
    Tensor table_cpu = testing::random_tensor({c.rows, c.vocab}, dtype, 3);
    Tensor table_gpu = table_cpu.to(Device::cuda);
    const Tensor before = table_cpu.clone();
    const Tensor src_gpu = src.to(Device::cuda), columns_gpu = columns.to(Device::cuda);
    for (int repeat = 0; repeat < 2; ++repeat) {
      column_scatter_add(src, columns, table_cpu);
      column_scatter_add(src_gpu, columns_gpu, table_gpu);
    }
    EXPECT_EQ(bit_mismatches(table_gpu, table_cpu), 0) << c.rows << "×" << c.vocab << " P = " << width;
    EXPECT_GT(bit_mismatches(table_cpu, before), 0);
  }
}

// The in-order path must keep the order of j for a repeated column: with a large value then its negation then a
// small one, rounding after each add gives a different result from any other order in bf16/f32.
TEST_P(ColumnSelectCuda, RepeatedColumnsAddInOrderOfJ) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const Tensor columns = columns_tensor({3, 1, 3, 3});
  const Tensor src = Tensor::from_doubles(std::vector<double>{1e8, 5.0, -1e8, 1.0}, {1, 4}, dtype);
  Tensor table_cpu = Tensor::from_doubles(std::vector<double>{0.0, 0.0, 0.0, 0.5}, {1, 4}, dtype);
  Tensor table_gpu = table_cpu.to(Device::cuda);
  column_scatter_add(src, columns, table_cpu);
  column_scatter_add(src.to(Device::cuda), columns.to(Device::cuda), table_gpu);
  EXPECT_EQ(bit_mismatches(table_gpu, table_cpu), 0);
}

// Bad columns (an error on the CPU) gather NaN and are skipped by the scatter-add on CUDA.
TEST_P(ColumnSelectCuda, ColumnsOutsideTheTableGatherNanAndScatterNothing) {
  GPT_REQUIRE_CUDA();
  const DType dtype = GetParam();
  const Tensor table = testing::random_tensor({2, 5}, dtype, 4).to(Device::cuda);
  const Tensor columns = columns_tensor({1, 5, -1, 4}).to(Device::cuda);
  Tensor out = Tensor::zeros({2, 4}, dtype, Device::cuda);
  column_gather(table, columns, out);
  const std::vector<double> o = out.to_doubles(), t = table.to_doubles();
  for (int64_t r = 0; r < 2; ++r) {
    EXPECT_EQ(o[r * 4 + 0], t[r * 5 + 1]);
    EXPECT_TRUE(std::isnan(o[r * 4 + 1]));
    EXPECT_TRUE(std::isnan(o[r * 4 + 2]));
    EXPECT_EQ(o[r * 4 + 3], t[r * 5 + 4]);
  }
  Tensor target = table.clone();
  column_scatter_add(Tensor::from_doubles(std::vector<double>(8, 1.0), {2, 4}, dtype).to(Device::cuda), columns,
                     target);
  const std::vector<double> after = target.to_doubles();
  auto plus_one = [dtype](double x) {  // x + 1 rounded once to the dtype, as the op does
    return Tensor::from_doubles(std::vector<double>{x + 1.0}, {1}, dtype).to_doubles()[0];
  };
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t v = 0; v < 5; ++v) {
      const bool hit = v == 1 || v == 4;
      EXPECT_EQ(after[r * 5 + v], hit ? plus_one(t[r * 5 + v]) : t[r * 5 + v]) << "row " << r << " column " << v;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ColumnSelectCuda, ::testing::Values(DType::f64, DType::f32, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace gpt
