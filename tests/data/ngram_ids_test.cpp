// §S.2 host products: n-gram row ids and sign-pool rows, against an independent int64 computation.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "base/check.h"
#include "trainer/data/host_products.h"
#include "trainer/data/train_loader.h"

namespace gpt {
namespace {

constexpr int64_t kSeedRows = 84'602'880;  // Vng of the `ext` profile

// int32 two's-complement wrap of an exact product, computed in int64.
int64_t wrap32(int64_t x) {
  const int64_t low = ((x % 4294967296LL) + 4294967296LL) % 4294967296LL;
  return low >= 2147483648LL ? low - 4294967296LL : low;
}
int64_t floor_mod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

struct Expected {
  std::vector<int64_t> rows, signs;
};

Expected reference(const std::vector<int32_t>& x, int64_t total_rows) {
  const int64_t half = total_rows / 2, m = half - 1;
  const size_t n = x.size();
  Expected e;
  e.rows.assign(2 * n, 0);
  e.signs.assign(2 * n, 0);
  for (size_t t = 0; t < n; ++t) {
    const int64_t p = t == 1 ? m : (t >= 2 ? x[t - 1] : 0);
    e.rows[t] = t == 0 ? m : floor_mod(wrap32(36313LL * x[t]) ^ wrap32(27191LL * p), m);
    e.rows[n + t] =
        t < 2 ? half + m
              : half + floor_mod(wrap32(17351LL * x[t]) ^ wrap32(60961LL * x[t - 1]) ^ wrap32(45259LL * x[t - 2]), m);
    e.signs[t] = t >= 1 ? (wrap32(30011LL * x[t - 1]) ^ wrap32(48271LL * x[t])) & 8191 : 0;
    e.signs[n + t] =
        t >= 2 ? (wrap32(26801LL * x[t - 2]) ^ wrap32(39779LL * x[t - 1]) ^ wrap32(58699LL * x[t])) & 8191 : 0;
  }
  return e;
}

void expect_matches(const std::vector<int32_t>& x, int64_t total_rows) {
  const Expected e = reference(x, total_rows);
  const std::vector<int32_t> rows = ngram_row_ids(x, total_rows);
  const std::vector<int32_t> signs = ngram_sign_rows(x);
  ASSERT_EQ(rows.size(), 2 * x.size());
  ASSERT_EQ(signs.size(), 2 * x.size());
  for (size_t j = 0; j < rows.size(); ++j) {
    ASSERT_EQ(rows[j], e.rows[j]) << "row id entry " << j << " of " << rows.size();
    ASSERT_EQ(signs[j], e.signs[j]) << "sign row entry " << j;
    ASSERT_GE(rows[j], j < x.size() ? 0 : total_rows / 2);
    ASSERT_LT(rows[j], j < x.size() ? total_rows / 2 : total_rows);
  }
}

TEST(NgramIds, PinnedValuesWithInt32Wrap) {
  // 60961·50256 = 3,063,656,016 wraps to −1,231,311,280 in int32; values pinned from an independent computation.
  const std::vector<int32_t> x{50256, 50256, 50256, 17};
  const std::vector<int32_t> rows = ngram_row_ids(x, kSeedRows);
  const int32_t half = 42'301'440, m = half - 1;
  EXPECT_EQ(rows[0], m);
  EXPECT_EQ(rows[1], 40'499'699);  // p_1 = m (the §2.5.2 quirk), not x_0
  EXPECT_EQ(rows[3], 13'313'657);
  EXPECT_EQ(rows[4], half + m);
  EXPECT_EQ(rows[5], half + m);
  EXPECT_EQ(rows[6], 49'319'697);
  EXPECT_EQ(rows[7], 61'543'722);
  const std::vector<int32_t> signs = ngram_sign_rows(x);
  EXPECT_EQ(signs[0], 0);
  EXPECT_EQ(signs[1], 1728);
  EXPECT_EQ(signs[4], 0);
  EXPECT_EQ(signs[5], 0);
  EXPECT_EQ(signs[6], 4816);
}

TEST(NgramIds, RandomAndExtremeTokensMatchInt64Reference) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int32_t> token(0, 50303);
  for (int64_t rows : {kSeedRows, int64_t{10'575'360}, int64_t{1024}, int64_t{6}}) {
    std::vector<int32_t> x(300);
    for (int32_t& v : x) v = token(rng);
    // Large tokens next to each other make every product wrap.
    for (size_t i = 100; i < 120; ++i) x[i] = 50256 + static_cast<int32_t>(i % 48);
    expect_matches(x, rows);
    expect_matches({50256}, rows);
    expect_matches({3, 50303}, rows);
  }
}

TEST(NgramIds, RejectsBadTableSize) {
  const std::vector<int32_t> x{1, 2, 3};
  EXPECT_THROW(ngram_row_ids(x, 7), Error);
  EXPECT_THROW(ngram_row_ids(x, 2), Error);
  EXPECT_THROW(ngram_row_ids(x, int64_t{1} << 32), Error);
}

TEST(NgramIds, LoaderAddsProductsOnlyWhenEnabled) {
  std::vector<uint16_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i == 0 || i == 20 ? 50256 : 900 + i);
  const SlicePlan plan{{0, 20}, {20, 33}};
  const CallShape shape{.slice_tokens = 32, .max_doc_tokens = 64, .cu_seqlens_rows = 8};
  const Microbatch off = materialize_slice(tokens, plan, shape, 512);
  EXPECT_TRUE(off.ngram_rows.empty());
  EXPECT_TRUE(off.ngram_sign_rows.empty());
  const Microbatch on = materialize_slice(tokens, plan, shape, 512, 1024);
  EXPECT_EQ(on.ngram_rows, ngram_row_ids(on.inputs, 1024));
  EXPECT_EQ(on.ngram_sign_rows, ngram_sign_rows(on.inputs));
  EXPECT_EQ(on.bigram_ids, off.bigram_ids);  // the bigram products are unchanged
  EXPECT_EQ(on.ngram_rows.size(), 64u);
}

}  // namespace
}  // namespace gpt
