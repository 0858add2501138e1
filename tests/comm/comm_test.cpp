// Collectives of the single-rank and thread-rank communicators.
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "base/check.h"
#include "trainer/comm/comm.h"

namespace gpt {
namespace {

// Runs body(rank, comm) on W threads; rethrows the first exception.
void run_ranks(int world, const std::function<void(int, Comm&)>& body) {
  ThreadRankGroup group(world);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto comm = group.comm(r);
      try {
        body(r, *comm);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

TEST(Comm, AllReduceSumAvgMax) {
  run_ranks(4, [](int r, Comm& c) {
    Tensor s = Tensor::from_doubles(std::vector<double>{1.0 * r, -2.0 * r, 0.5}, {3}, DType::f32);
    Tensor a = s.clone(), m = s.clone();
    c.all_reduce(s, ReduceOp::sum);
    c.all_reduce(a, ReduceOp::avg);
    c.all_reduce(m, ReduceOp::max);
    EXPECT_EQ(s.to_doubles(), (std::vector<double>{6, -12, 2}));
    EXPECT_EQ(a.to_doubles(), (std::vector<double>{1.5, -3, 0.5}));
    EXPECT_EQ(m.to_doubles(), (std::vector<double>{3, 0, 0.5}));
    Tensor i = Tensor::zeros({2}, DType::i64);
    i.data<int64_t>()[0] = r == 2 ? 7 : -1;
    i.data<int64_t>()[1] = -1;
    c.all_reduce(i, ReduceOp::max);
    EXPECT_EQ(i.data<int64_t>()[0], 7);
    EXPECT_EQ(i.data<int64_t>()[1], -1);
  });
}

TEST(Comm, ReduceScatterInPlaceAndAllGatherInPlace) {
  run_ranks(2, [](int r, Comm& c) {
    // rank r holds [r, r+1, r+2, r+3] (rows of 2): avg chunk 0 = [0.5, 1.5], chunk 1 = [2.5, 3.5].
    Tensor g = Tensor::from_doubles(std::vector<double>{1.0 * r, r + 1.0, r + 2.0, r + 3.0}, {2, 2}, DType::bf16);
    Tensor mine = g.slice(r, r + 1);
    c.reduce_scatter(g, mine, ReduceOp::avg);
    const std::vector<double> expect = r == 0 ? std::vector<double>{0.5, 1.5} : std::vector<double>{2.5, 3.5};
    EXPECT_EQ(mine.to_doubles(), expect);
    // Other chunk untouched.
    const auto all = g.to_doubles();
    if (r == 0) {
      EXPECT_EQ(all[2], 2.0);
    }
    c.all_gather(mine, g);
    EXPECT_EQ(g.to_doubles(), (std::vector<double>{0.5, 1.5, 2.5, 3.5}));
  });
}

TEST(Comm, BroadcastAndMismatch) {
  run_ranks(3, [](int r, Comm& c) {
    Tensor t = Tensor::from_doubles(std::vector<double>{1.0 * r}, {1}, DType::f64);
    c.broadcast(t, 2);
    EXPECT_EQ(t.to_doubles()[0], 2.0);
  });
  EXPECT_THROW(run_ranks(2,
                         [](int r, Comm& c) {
                           Tensor t = Tensor::zeros({r + 1}, DType::f32);
                           c.all_reduce(t, ReduceOp::sum);
                         }),
               Error);
  EXPECT_THROW(run_ranks(2,
                         [](int, Comm& c) {
                           Tensor whole = Tensor::zeros({3}, DType::f32), part = Tensor::zeros({1}, DType::f32);
                           c.reduce_scatter(whole, part, ReduceOp::avg);
                         }),
               Error);
}

TEST(Comm, SingleRankIsIdentity) {
  auto c = make_single_rank_comm();
  EXPECT_EQ(c->world_size(), 1);
  Tensor t = Tensor::from_doubles(std::vector<double>{1, 2}, {2}, DType::f32);
  c->all_reduce(t, ReduceOp::avg);
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{1, 2}));
  Tensor out = Tensor::zeros({2}, DType::f32);
  c->reduce_scatter(t, out, ReduceOp::avg);
  EXPECT_EQ(out.to_doubles(), (std::vector<double>{1, 2}));
  EXPECT_THROW(c->broadcast(t, 1), Error);
}

}  // namespace
}  // namespace gpt
