#include <gtest/gtest.h>

#include <vector>

#include "kernels/embedding.h"
#include "tests/common/gradcheck.h"

namespace gpt {
namespace {

using testing::random_tensor;

Tensor ids_tensor(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

TEST(Embedding, ForwardGathersRows) {
  const std::vector<double> table_values = {0, 1, 10, 11, 20, 21, 30, 31};  // row r = (10r, 10r+1)
  Tensor table = Tensor::from_doubles(table_values, {4, 2}, DType::f32);
  Tensor ids = ids_tensor({3, 0, 3, 1});
  Tensor out = Tensor::empty({4, 2}, DType::f32);
  embedding_forward(table, ids, out);
  EXPECT_EQ(out.to_doubles(), (std::vector<double>{30, 31, 0, 1, 30, 31, 10, 11}));
}

TEST(Embedding, ForwardKeepsIdShape) {
  Tensor table = random_tensor({5, 3}, DType::bf16, 1);
  Tensor ids = ids_tensor({4, 2, 0, 1}).view({2, 2});
  Tensor out = Tensor::empty({2, 2, 3}, DType::bf16);
  embedding_forward(table, ids, out);
  const auto t = table.to_doubles(), o = out.to_doubles();
  for (int c = 0; c < 3; ++c) EXPECT_EQ(o[3 + c], t[2 * 3 + c]);
}

TEST(Embedding, BackwardScatterAddsRepeatedRows) {
  Tensor ids = ids_tensor({2, 0, 2, 2});
  Tensor dout = Tensor::from_doubles(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}, DType::f64);
  Tensor dtable = Tensor::from_doubles(std::vector<double>{100, 100, 100, 100, 100, 100}, {3, 2}, DType::f64);
  embedding_backward(dout, ids, dtable);
  // row 0 <- token 1; row 1 untouched; row 2 <- tokens 0, 2, 3.
  EXPECT_EQ(dtable.to_doubles(), (std::vector<double>{103, 104, 100, 100, 113, 116}));
}

TEST(Embedding, BackwardMatchesFiniteDifferences) {
  Tensor table = random_tensor({6, 4}, DType::f64, 2);
  Tensor ids = ids_tensor({5, 1, 5, 0, 3, 5, 1});
  const Tensor w = random_tensor({7, 4}, DType::f64, 3);
  Tensor out = Tensor::empty({7, 4}, DType::f64);
  auto loss = [&] {
    embedding_forward(table, ids, out);
    return testing::dot(out, w);
  };
  const auto expected = testing::numeric_gradient(loss, table);
  Tensor dtable = Tensor::zeros({6, 4}, DType::f64);
  embedding_backward(w, ids, dtable);
  EXPECT_LT(testing::max_relative_error(dtable.to_doubles(), expected), 1e-8);
}

TEST(Embedding, Bf16BackwardRoundsOncePerRow) {
  // Three contributions of 2^-9 onto 1.0: per-token bf16 adds would each round back to 1.0; one fp32 sum
  // (3·2^-9) added once rounds to 1 + 2^-7 (spacing of bf16 at 1 is 2^-7).
  Tensor ids = ids_tensor({0, 0, 0});
  const double e = 1.0 / 512;
  Tensor dout = Tensor::from_doubles(std::vector<double>{e, e, e}, {3, 1}, DType::bf16);
  Tensor dtable = Tensor::from_doubles(std::vector<double>{1.0}, {1, 1}, DType::bf16);
  embedding_backward(dout, ids, dtable);
  EXPECT_EQ(dtable.to_doubles()[0], 1.0 + 1.0 / 128);
}

TEST(Embedding, ValuePlaneUsesRowOffset) {
  const int64_t vocab = 3;
  Tensor table = random_tensor({4 * vocab, 2}, DType::f64, 4);
  Tensor ids = ids_tensor({2, 0});
  Tensor out = Tensor::empty({2, 2}, DType::f64);
  value_embedding_forward(table, ids, 2, out, vocab);
  const auto t = table.to_doubles(), o = out.to_doubles();
  EXPECT_EQ(o[0], t[(2 * vocab + 2) * 2]);
  EXPECT_EQ(o[3], t[(2 * vocab + 0) * 2 + 1]);
  Tensor dtable = Tensor::zeros({4 * vocab, 2}, DType::f64);
  value_embedding_backward(out, ids, 2, dtable, vocab);
  const auto g = dtable.to_doubles();
  EXPECT_EQ(g[(2 * vocab + 2) * 2], o[0]);
  double others = 0;
  for (int64_t r = 0; r < 4 * vocab; ++r)
    if (r != 2 * vocab && r != 2 * vocab + 2) others += std::abs(g[r * 2]) + std::abs(g[r * 2 + 1]);
  EXPECT_EQ(others, 0.0);
}

TEST(Embedding, RejectsOutOfRangeIds) {
  Tensor table = Tensor::zeros({4, 2}, DType::f32);
  Tensor out = Tensor::empty({1, 2}, DType::f32);
  Tensor bad = ids_tensor({4});
  EXPECT_THROW(embedding_forward(table, bad, out), Error);
  Tensor negative = ids_tensor({-1});
  EXPECT_THROW(embedding_backward(out, negative, table), Error);
  Tensor planes = Tensor::zeros({6, 2}, DType::f32);
  EXPECT_THROW(value_embedding_forward(planes, ids_tensor({0}), 2, out, 3), Error);  // plane 2 needs 9 rows
}

TEST(Embedding, RejectsWrongIdDtypeAndShape) {
  Tensor table = Tensor::zeros({4, 2}, DType::f32);
  Tensor ids64 = Tensor::zeros({2}, DType::i64);
  Tensor out = Tensor::empty({2, 2}, DType::f32);
  EXPECT_THROW(embedding_forward(table, ids64, out), Error);
  Tensor wrong = Tensor::empty({2, 3}, DType::f32);
  EXPECT_THROW(embedding_forward(table, ids_tensor({0, 1}), wrong), Error);
}

}  // namespace
}  // namespace gpt
