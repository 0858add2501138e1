// Every version of the CUDA scatter-add behind embedding_backward and bigram_backward (kernels/cuda/
// embedding_variants.h) against the CPU reference: at the training run's shapes on Zipf-distributed ids (49,152
// tokens, d = 768, the token, value and bigram table sizes, with and without the sign product), and on the edge
// cases of the chunk plan (kernels/cuda/scatter_plan.h): one id for every token, all ids distinct, ids outside the
// tables, no tokens.
//
// What must match, and how closely:
//   - rows that no valid token hits: unchanged, bit for bit, in every version;
//   - v1: the CPU's bits everywhere (one block sums a row's tokens in token order, as the CPU does);
//   - v2: the CPU's bits on every row whose run of sorted positions lies inside one chunk of 32 (summed exactly as
//     v1 does); a row whose run crosses a chunk boundary is summed in pieces, so its accumulation-type sum may
//     differ from the CPU's by the rounding of two summation orders of k terms, at most 2·k·u·(|g| + Σ|x|) with u
//     the accumulation type's unit roundoff, plus one unit in the last place of the stored result; and over all
//     touched rows the relative Frobenius error stays within the GPU tests' tolerance for the dtype
//     (tests/gpu/gpu_test_util.h);
//   - every version gives the same bits when run twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kernels/bench/zipf_ids.h"
#include "kernels/bigram.h"
#include "kernels/cuda/embedding_variants.h"
#include "kernels/cuda/scatter_plan.h"
#include "kernels/embedding.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using cuda::scatter_plan::kScatterChunk;

constexpr int64_t kTokens = 49152, kDim = 768, kSignRows = 8192;

Tensor ids_tensor(const std::vector<int32_t>& ids) {
  Tensor t = Tensor::empty({static_cast<int64_t>(ids.size())}, DType::i32);
  std::copy(ids.begin(), ids.end(), t.data<int32_t>());
  return t;
}

// Values in [-1, 1) from a hash of (seed, index), stored straight into the dtype: a 377,280-row table without
// 290 M normal draws and a 2.3 GB vector of doubles.
Tensor hashed_table(int64_t rows, int64_t d, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty({rows, d}, dtype);
  const auto fill = [&](auto* p, auto convert) {
    for (int64_t i = 0; i < rows * d; ++i) {
      uint64_t x = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull;
      x ^= x >> 31;
      x *= 0xBF58476D1CE4E5B9ull;
      x ^= x >> 29;
      p[i] = convert(static_cast<double>(x >> 11) * 0x1p-52 - 1.0);
    }
  };
  if (dtype == DType::bf16) fill(t.data<bf16>(), [](double v) { return bf16(static_cast<float>(v)); });
  if (dtype == DType::f32) fill(t.data<float>(), [](double v) { return static_cast<float>(v); });
  if (dtype == DType::f64) fill(t.data<double>(), [](double v) { return v; });
  return t;
}

// One call's inputs (CPU tensors). signed_rows: bigram_backward (dout ⊙ sign), else embedding_backward.
struct Scatter {
  int64_t rows = 0, d = 0, sign_rows = 0;
  bool signed_rows = false;
  std::vector<int32_t> ids, sign_ids;
  Tensor dout, sign, dtable;  // dtable: the gradient before the call

  static Scatter make(int64_t rows, int64_t d, DType dtype, bool signed_rows, std::vector<int32_t> ids, uint64_t seed,
                      int64_t sign_rows = kSignRows) {
    Scatter s;
    s.rows = rows;
    s.d = d;
    s.signed_rows = signed_rows;
    s.sign_rows = sign_rows;
    s.ids = std::move(ids);
    const auto n = static_cast<int64_t>(s.ids.size());
    s.dout = testing::random_tensor({n, d}, dtype, seed);
    s.dtable = hashed_table(rows, d, dtype, seed + 1);
    const Tensor sign_ids = random_ids(n, 0, sign_rows, seed + 2);
    s.sign_ids.assign(sign_ids.data<int32_t>(), sign_ids.data<int32_t>() + n);
    std::vector<double> signs(static_cast<size_t>(sign_rows * d));
    for (size_t i = 0; i < signs.size(); ++i) signs[i] = ((i * 2654435761u) >> 7) % 2 == 0 ? 1.0 : -1.0;
    s.sign = Tensor::from_doubles(signs, {sign_rows, d}, dtype);
    return s;
  }

  bool token_counts(size_t t) const {
    const bool row_ok = ids[t] >= 0 && ids[t] < rows;
    return row_ok && (!signed_rows || (sign_ids[t] >= 0 && sign_ids[t] < sign_rows));
  }

  // The CPU op on the tokens that count (it refuses ids outside the tables; the CUDA scatter skips them).
  Tensor cpu_reference() const {
    std::vector<int32_t> kept_ids, kept_sign_ids;
    std::vector<int64_t> kept;
    for (size_t t = 0; t < ids.size(); ++t) {
      if (!token_counts(t)) continue;
      kept.push_back(static_cast<int64_t>(t));
      kept_ids.push_back(ids[t]);
      kept_sign_ids.push_back(sign_ids[t]);
    }
    Tensor kept_dout = Tensor::empty({static_cast<int64_t>(kept.size()), d}, dout.dtype());
    const size_t row_bytes = static_cast<size_t>(d) * dtype_size(dout.dtype());
    for (size_t i = 0; i < kept.size(); ++i) {
      std::memcpy(static_cast<char*>(kept_dout.raw()) + i * row_bytes,
                  static_cast<const char*>(dout.raw()) + static_cast<size_t>(kept[i]) * row_bytes, row_bytes);
    }
    Tensor out = dtable.clone();
    if (signed_rows) {
      bigram_backward(kept_dout, sign, ids_tensor(kept_ids), ids_tensor(kept_sign_ids), out);
    } else {
      embedding_backward(kept_dout, ids_tensor(kept_ids), out);
    }
    return out;
  }

  // Scatter version `version` on the GPU, the result copied back.
  Tensor on_gpu(int version) const {
    Tensor out = gpu(dtable);
    if (signed_rows) {
      cuda::bigram_backward_version(gpu(dout), gpu(sign), gpu(ids_tensor(ids)), gpu(ids_tensor(sign_ids)), out,
                                    version);
    } else {
      cuda::embedding_backward_version(gpu(dout), gpu(ids_tensor(ids)), out, version);
    }
    GPT_CUDA_CHECK(cudaDeviceSynchronize());
    return out.to(Device::cpu);
  }
};

bool rows_equal(const Tensor& a, const Tensor& b, int64_t row) {
  const size_t bytes = static_cast<size_t>(a.size(1)) * dtype_size(a.dtype());
  return std::memcmp(static_cast<const char*>(a.raw()) + row * bytes, static_cast<const char*>(b.raw()) + row * bytes,
                     bytes) == 0;
}

// One unit in the last place of the storage type at |v|'s binade.
double ulp_of(DType dtype, double v) {
  const int mantissa = dtype == DType::bf16 ? 7 : dtype == DType::f32 ? 23 : 52;
  int exponent = 0;
  std::frexp(std::max(std::abs(v), 1e-300), &exponent);
  return std::ldexp(1.0, exponent - 1 - mantissa);
}

// Checks `got` against the CPU reference `ref` as the file's header says. `exact`: every row bit for bit.
void expect_scatter_matches(const Scatter& s, const Tensor& got, const Tensor& ref, bool exact,
                            const std::string& what) {
  SCOPED_TRACE(what);
  std::vector<int32_t> sorted = s.ids;
  std::sort(sorted.begin(), sorted.end());              // the positions of the CUDA sort: all ids, bad ones included
  std::map<int32_t, std::pair<int64_t, int64_t>> runs;  // valid row → [first, last) sorted positions
  for (size_t p = 0; p < sorted.size(); ++p) {
    if (sorted[p] < 0 || sorted[p] >= s.rows) continue;
    auto [it, fresh] = runs.try_emplace(sorted[p], std::pair<int64_t, int64_t>{static_cast<int64_t>(p), 0});
    it->second.second = static_cast<int64_t>(p) + 1;
  }
  // Σ|x| per column for the rows whose run crosses a chunk boundary (the only rows allowed to differ).
  std::map<int32_t, std::vector<double>> abs_sums;
  for (const auto& [row, run] : runs) {
    if (!exact && run.first / kScatterChunk != (run.second - 1) / kScatterChunk) {
      abs_sums[row].assign(static_cast<size_t>(s.d), 0.0);
    }
  }
  if (!abs_sums.empty()) {
    const std::vector<double> dout = s.dout.to_doubles();
    for (size_t t = 0; t < s.ids.size(); ++t) {
      const auto it = abs_sums.find(s.ids[t]);
      if (it == abs_sums.end() || !s.token_counts(t)) continue;
      for (int64_t c = 0; c < s.d; ++c) it->second[static_cast<size_t>(c)] += std::abs(dout[t * s.d + c]);
    }
  }
  const double u = s.dout.dtype() == DType::f64 ? 0x1p-53 : 0x1p-24;  // unit roundoff of the accumulation type
  double diff2 = 0, ref2 = 0;
  int64_t bad_rows = 0;
  for (int64_t row = 0; row < s.rows; ++row) {
    const auto run = runs.find(static_cast<int32_t>(row));
    if (run == runs.end()) {
      if (!rows_equal(got, s.dtable, row) && ++bad_rows <= 5) ADD_FAILURE() << "untouched row " << row << " changed";
      continue;
    }
    const std::vector<double> g = got.slice(row, row + 1).to_doubles(), r = ref.slice(row, row + 1).to_doubles();
    for (int64_t c = 0; c < s.d; ++c) {
      diff2 += (g[c] - r[c]) * (g[c] - r[c]);
      ref2 += r[c] * r[c];
    }
    const auto sums = abs_sums.find(static_cast<int32_t>(row));
    if (sums == abs_sums.end()) {
      if (!rows_equal(got, ref, row) && ++bad_rows <= 5) {
        ADD_FAILURE() << "row " << row << " (run of " << run->second.second - run->second.first
                      << " positions inside one chunk) differs from the CPU's bits";
      }
      continue;
    }
    const std::vector<double> initial = s.dtable.slice(row, row + 1).to_doubles();
    const int64_t k = run->second.second - run->second.first;
    for (int64_t c = 0; c < s.d; ++c) {
      const double bound = 2.0 * static_cast<double>(k + 1) * u * (std::abs(initial[c]) + sums->second[c]) +
                           ulp_of(s.dout.dtype(), std::max(std::abs(g[c]), std::abs(r[c])));
      if (!(std::abs(g[c] - r[c]) <= bound) && ++bad_rows <= 5) {
        ADD_FAILURE() << "row " << row << " (run of " << k << ") column " << c << ": " << g[c] << " vs the CPU's "
                      << r[c] << ", beyond the bound " << bound;
      }
    }
  }
  EXPECT_EQ(bad_rows, 0) << "rows or elements out of bounds (the first five are listed)";
  const double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  EXPECT_LE(rel, tolerance_for(s.dout.dtype())) << "relative Frobenius error over the touched rows";
}

// v1 and v2 against the CPU reference, each run twice for determinism. v2_exact: v2 must give the CPU's bits too.
void check_every_version(const Scatter& s, bool v2_exact, const std::string& what) {
  const Tensor ref = s.cpu_reference();
  for (int version = 1; version <= cuda::kScatterVersions; ++version) {
    const std::string label = what + ", scatter v" + std::to_string(version);
    const Tensor got = s.on_gpu(version);
    expect_scatter_matches(s, got, ref, version == 1 || v2_exact, label);
    const Tensor again = s.on_gpu(version);
    EXPECT_EQ(std::memcmp(got.raw(), again.raw(), got.nbytes()), 0) << label << ": not the same bits twice";
  }
}

struct TableCase {
  int64_t rows;
  bool signed_rows;
};

class ScatterRowsZipf : public ::testing::TestWithParam<TableCase> {};

// The training run's calls: 49,152 tokens of one microbatch into the token table (50,304 rows), the value tables
// (251,520 rows) and the bigram table (377,280 rows), each with and without the sign product.
TEST_P(ScatterRowsZipf, EveryVersionMatchesCpuAtTheRunShape) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [rows, signed_rows] = GetParam();
  const Scatter s = Scatter::make(rows, kDim, DType::bf16, signed_rows, zipf_ids(kTokens, rows, 51), 52);
  check_every_version(s, false, "Zipf ids into " + std::to_string(rows) + " rows");
}

INSTANTIATE_TEST_SUITE_P(Tables, ScatterRowsZipf,
                         ::testing::Values(TableCase{50304, false}, TableCase{50304, true}, TableCase{251520, false},
                                           TableCase{251520, true}, TableCase{377280, false}, TableCase{377280, true}),
                         [](const ::testing::TestParamInfo<TableCase>& info) {
                           return std::to_string(info.param.rows) + (info.param.signed_rows ? "_signed" : "");
                         });

// Every dtype and an unpacked row width (13 columns: one element per thread) on long runs of few ids.
TEST(ScatterRowsCuda, EveryDtypeOnLongRuns) {
  GPT_REQUIRE_CUDA_DEVICE();
  for (const DType dtype : {DType::f64, DType::f32, DType::bf16}) {
    for (const int64_t d : {24, 13}) {
      for (const bool signed_rows : {false, true}) {
        const Scatter s = Scatter::make(300, d, dtype, signed_rows, zipf_ids(5000, 300, 61), 62, 17);
        check_every_version(
            s, false, std::string(dtype_name(dtype)) + ", d " + std::to_string(d) + (signed_rows ? ", signed" : ""));
      }
    }
  }
}

// One run over every chunk: the combine adds 1,535 partials in order.
TEST(ScatterRowsCuda, OneIdForEveryToken) {
  GPT_REQUIRE_CUDA_DEVICE();
  for (const bool signed_rows : {false, true}) {
    const Scatter s = Scatter::make(50304, kDim, DType::bf16, signed_rows, std::vector<int32_t>(kTokens, 1234), 71);
    check_every_version(s, false, signed_rows ? "one id, signed" : "one id");
  }
}

// No run crosses a chunk boundary: v2 must give v1's (the CPU's) bits.
TEST(ScatterRowsCuda, AllIdsDistinctGiveTheCpuBitsInEveryVersion) {
  GPT_REQUIRE_CUDA_DEVICE();
  std::vector<int32_t> ids(kTokens);
  for (int64_t t = 0; t < kTokens; ++t) ids[static_cast<size_t>(t)] = static_cast<int32_t>((t * 7919) % 50304);
  for (const bool signed_rows : {false, true}) {
    const Scatter s = Scatter::make(50304, kDim, DType::bf16, signed_rows, ids, 81);
    check_every_version(s, true, signed_rows ? "distinct ids, signed" : "distinct ids");
  }
}

// Ids outside the table (runs of them across chunks, at both ends of the sorted order) and sign ids outside the
// sign table are skipped: the result is the CPU's on the other tokens.
TEST(ScatterRowsCuda, IdsOutsideTheTablesAreSkipped) {
  GPT_REQUIRE_CUDA_DEVICE();
  const int64_t rows = 40;
  std::vector<int32_t> ids = zipf_ids(3000, rows, 91);
  for (size_t t = 0; t < ids.size(); t += 7) ids[t] = -1;
  for (size_t t = 3; t < ids.size(); t += 11) ids[t] = static_cast<int32_t>(rows);
  for (size_t t = 5; t < ids.size(); t += 101) ids[t] = 1 << 30;
  for (const bool signed_rows : {false, true}) {
    Scatter s = Scatter::make(rows, kDim, DType::bf16, signed_rows, ids, 92, 17);
    for (size_t t = 1; t < s.sign_ids.size(); t += 13) s.sign_ids[t] = t % 2 == 0 ? -3 : 17;
    check_every_version(s, false, signed_rows ? "bad ids, signed" : "bad ids");
  }
}

TEST(ScatterRowsCuda, NoTokensLeaveTheTableAlone) {
  GPT_REQUIRE_CUDA_DEVICE();
  for (const bool signed_rows : {false, true}) {
    const Scatter s = Scatter::make(50, 16, DType::bf16, signed_rows, {}, 101, 17);
    for (int version = 1; version <= cuda::kScatterVersions; ++version) {
      const Tensor got = s.on_gpu(version);
      EXPECT_EQ(std::memcmp(got.raw(), s.dtable.raw(), got.nbytes()), 0) << "v" << version;
    }
  }
}

}  // namespace
}  // namespace gpt
