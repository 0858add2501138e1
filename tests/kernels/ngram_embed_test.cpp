// kernels/ngram_embed.h: forward against an f64 formula, backward against central finite differences (f64).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "base/check.h"
#include "kernels/ngram_embed.h"

namespace gpt {
namespace {

struct Case {
  int64_t rows = 24, pool_rows = 8, d = 5, tokens = 7;
  std::vector<double> table, pool, weight;  // weight: the loss is Σ weight ⊙ Ng
  std::vector<int32_t> ids, signs;
};

Case make_case(uint64_t seed) {
  Case c;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  c.table.resize(static_cast<size_t>(c.rows * c.d));
  for (double& v : c.table) v = normal(rng);
  c.pool.resize(static_cast<size_t>(c.pool_rows * c.d));
  for (double& v : c.pool) v = normal(rng) >= 0 ? 1.0 : -1.0;
  c.weight.resize(static_cast<size_t>(c.tokens * c.d));
  for (double& v : c.weight) v = normal(rng);
  // Bigram ids in [0, 12), trigram ids in [12, 24); repeated rows on purpose.
  for (int64_t t = 0; t < c.tokens; ++t) c.ids.push_back(static_cast<int32_t>(t % 4));
  for (int64_t t = 0; t < c.tokens; ++t) c.ids.push_back(static_cast<int32_t>(12 + (t * 5) % 3));
  for (int64_t j = 0; j < 2 * c.tokens; ++j) c.signs.push_back(static_cast<int32_t>((j * 3) % c.pool_rows));
  return c;
}

Tensor ids_tensor(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

double loss(const Case& c, const std::vector<double>& table) {
  const Tensor tt = Tensor::from_doubles(table, {c.rows, c.d}, DType::f64);
  const Tensor pool = Tensor::from_doubles(c.pool, {c.pool_rows, c.d}, DType::f64);
  Tensor out = Tensor::empty({c.tokens, c.d}, DType::f64);
  ngram_embed_forward(tt, pool, ids_tensor(c.ids), ids_tensor(c.signs), out);
  const std::vector<double> y = out.to_doubles();
  double l = 0;
  for (size_t i = 0; i < y.size(); ++i) l += c.weight[i] * y[i];
  return l;
}

TEST(NgramEmbed, ForwardMatchesFormula) {
  const Case c = make_case(1);
  for (DType dtype : {DType::f64, DType::f32, DType::bf16}) {
    const Tensor table = Tensor::from_doubles(c.table, {c.rows, c.d}, dtype);
    const Tensor pool = Tensor::from_doubles(c.pool, {c.pool_rows, c.d}, dtype);
    Tensor out = Tensor::empty({c.tokens, c.d}, dtype);
    ngram_embed_forward(table, pool, ids_tensor(c.ids), ids_tensor(c.signs), out);
    const std::vector<double> stored = table.to_doubles();  // the table as rounded to dtype
    const std::vector<double> y = out.to_doubles();
    for (int64_t t = 0; t < c.tokens; ++t) {
      for (int64_t k = 0; k < c.d; ++k) {
        const auto at = [&](int64_t j) {
          return stored[static_cast<size_t>(c.ids[j] * c.d + k)] * c.pool[static_cast<size_t>(c.signs[j] * c.d + k)];
        };
        const double expected = at(t) + at(c.tokens + t);
        // One rounding of the exact sum to the output dtype.
        const double tol = dtype == DType::bf16 ? std::abs(expected) * 0x1p-8 : dtype == DType::f32 ? 1e-6 : 0;
        EXPECT_NEAR(y[static_cast<size_t>(t * c.d + k)], expected, tol) << dtype_name(dtype) << " t=" << t;
      }
    }
  }
}

TEST(NgramEmbed, BackwardMatchesFiniteDifferences) {
  const Case c = make_case(2);
  const Tensor pool = Tensor::from_doubles(c.pool, {c.pool_rows, c.d}, DType::f64);
  const Tensor dout = Tensor::from_doubles(c.weight, {c.tokens, c.d}, DType::f64);
  Tensor grad = Tensor::zeros({c.rows, c.d}, DType::f64);
  ngram_embed_backward(dout, pool, ids_tensor(c.ids), ids_tensor(c.signs), grad);
  const std::vector<double> g = grad.to_doubles();
  const double h = 1e-4;
  int nonzero = 0;
  for (size_t i = 0; i < c.table.size(); ++i) {
    std::vector<double> plus = c.table, minus = c.table;
    plus[i] += h;
    minus[i] -= h;
    const double fd = (loss(c, plus) - loss(c, minus)) / (2 * h);
    EXPECT_NEAR(g[i], fd, 1e-8 * (1 + std::abs(fd))) << "table entry " << i;
    nonzero += fd != 0;
  }
  EXPECT_GT(nonzero, 20);  // the check covers bigram and trigram rows, untouched rows stay zero
}

TEST(NgramEmbed, BackwardAddsAndIsDeterministic) {
  const Case c = make_case(3);
  const Tensor pool = Tensor::from_doubles(c.pool, {c.pool_rows, c.d}, DType::f32);
  const Tensor dout = Tensor::from_doubles(c.weight, {c.tokens, c.d}, DType::f32);
  Tensor once = Tensor::zeros({c.rows, c.d}, DType::f32);
  ngram_embed_backward(dout, pool, ids_tensor(c.ids), ids_tensor(c.signs), once);
  Tensor twice = Tensor::zeros({c.rows, c.d}, DType::f32);
  ngram_embed_backward(dout, pool, ids_tensor(c.ids), ids_tensor(c.signs), twice);
  ngram_embed_backward(dout, pool, ids_tensor(c.ids), ids_tensor(c.signs), twice);
  const std::vector<float> a = once.to_floats(), b = twice.to_floats();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b[i], 2 * a[i]) << i;
}

TEST(NgramEmbed, RejectsBadArguments) {
  const Case c = make_case(4);
  const Tensor table = Tensor::from_doubles(c.table, {c.rows, c.d}, DType::f32);
  const Tensor pool = Tensor::from_doubles(c.pool, {c.pool_rows, c.d}, DType::f32);
  Tensor out = Tensor::empty({c.tokens, c.d}, DType::f32);
  std::vector<int32_t> bad = c.ids;
  bad[3] = static_cast<int32_t>(c.rows);
  EXPECT_THROW(ngram_embed_forward(table, pool, ids_tensor(bad), ids_tensor(c.signs), out), Error);
  const std::vector<int32_t> short_ids(c.ids.begin(), c.ids.begin() + c.tokens);
  EXPECT_THROW(ngram_embed_forward(table, pool, ids_tensor(short_ids), ids_tensor(c.signs), out), Error);
  Tensor wrong_grad = Tensor::zeros({c.rows, c.d}, DType::f64);  // must be the accumulation dtype f32
  EXPECT_THROW(ngram_embed_backward(out, pool, ids_tensor(c.ids), ids_tensor(c.signs), wrong_grad), Error);
}

}  // namespace
}  // namespace gpt
