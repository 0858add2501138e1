// The asynchronous collectives of comm.h on the CPU communicators (single rank, thread ranks): each gives bitwise
// what its blocking twin gives, handles may be waited in any order, a handle destroyed unwaited has finished its
// collective, and PendingCollective's own rules (wait once, waits when destroyed or overwritten, a failing wait
// is not retried).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>

#include "tests/common/thread_ranks.h"
#include "trainer/comm/comm.h"

namespace gpt {
namespace {

Tensor rank_data(int64_t n, DType dtype, int rank, uint64_t seed) {
  std::mt19937_64 rng(seed * 131 + static_cast<uint64_t>(rank));
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = nd(rng);
  return Tensor::from_doubles(v, {n}, dtype);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// The three collectives issued asynchronously, then waited in the given order (0 = all_reduce, 1 = reduce_scatter,
// 2 = all_gather) or, with wait_order empty, left to the handles' destructors.
struct Outputs {
  Tensor reduced, scattered, gathered;
};
Outputs run_async(Comm& comm, DType dtype, const std::vector<int>& wait_order) {
  const int world = comm.world_size(), rank = comm.rank();
  const int64_t n = 6;
  Outputs out;
  out.reduced = rank_data(n * world, dtype, rank, 1);
  Tensor scatter_in = rank_data(n * world, dtype, rank, 2);
  out.scattered = Tensor::zeros({n}, dtype);
  Tensor gather_in = rank_data(n, dtype, rank, 3);
  out.gathered = Tensor::zeros({n * world}, dtype);
  {
    std::vector<PendingCollective> handles;
    handles.push_back(comm.all_reduce_async(out.reduced, ReduceOp::avg));
    handles.push_back(comm.reduce_scatter_async(scatter_in, out.scattered, ReduceOp::sum));
    handles.push_back(comm.all_gather_async(gather_in, out.gathered));
    for (int i : wait_order) handles[static_cast<size_t>(i)].wait();
  }
  return out;
}

Outputs run_blocking(Comm& comm, DType dtype) {
  const int world = comm.world_size(), rank = comm.rank();
  const int64_t n = 6;
  Outputs out;
  out.reduced = rank_data(n * world, dtype, rank, 1);
  comm.all_reduce(out.reduced, ReduceOp::avg);
  const Tensor scatter_in = rank_data(n * world, dtype, rank, 2);
  out.scattered = Tensor::zeros({n}, dtype);
  comm.reduce_scatter(scatter_in, out.scattered, ReduceOp::sum);
  const Tensor gather_in = rank_data(n, dtype, rank, 3);
  out.gathered = Tensor::zeros({n * world}, dtype);
  comm.all_gather(gather_in, out.gathered);
  return out;
}

void expect_same(const Outputs& got, const Outputs& want, const std::string& what) {
  EXPECT_TRUE(bitwise_equal(got.reduced, want.reduced)) << what << ": all_reduce";
  EXPECT_TRUE(bitwise_equal(got.scattered, want.scattered)) << what << ": reduce_scatter";
  EXPECT_TRUE(bitwise_equal(got.gathered, want.gathered)) << what << ": all_gather";
}

TEST(AsyncCollectives, ThreadRanksEqualTheBlockingCallsInAnyWaitOrder) {
  const std::vector<std::vector<int>> orders = {{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {}};
  for (int world : {1, 2, 4}) {
    for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
      test::run_thread_ranks(world, [&](int rank, Comm& comm) {
        const Outputs want = run_blocking(comm, dtype);
        for (const std::vector<int>& order : orders) {
          const std::string what = "W=" + std::to_string(world) + " rank " + std::to_string(rank) + " " +
                                   dtype_name(dtype) + (order.empty() ? " (never waited)" : " (waited)");
          expect_same(run_async(comm, dtype, order), want, what);
        }
        // The communicator is in step afterwards: a blocking collective still pairs up across ranks.
        Tensor t = Tensor::from_doubles(std::vector<double>{static_cast<double>(rank)}, {1}, DType::f64);
        comm.all_reduce(t, ReduceOp::sum);
        EXPECT_EQ(t.to_doubles()[0], world * (world - 1) / 2.0);
      });
    }
  }
}

TEST(AsyncCollectives, SingleRankCopiesLikeItsBlockingCalls) {
  auto comm = make_single_rank_comm();
  for (DType dtype : {DType::f32, DType::bf16}) {
    expect_same(run_async(*comm, dtype, {2, 0, 1}), run_blocking(*comm, dtype), dtype_name(dtype));
  }
}

TEST(AsyncCollectives, ArgumentErrorsThrowAtIssue) {
  test::run_thread_ranks(2, [](int, Comm& comm) {
    Tensor whole = Tensor::zeros({6}, DType::f32);
    Tensor wrong = Tensor::zeros({4}, DType::f32);
    EXPECT_THROW((void)comm.reduce_scatter_async(whole, wrong, ReduceOp::sum), Error);
  });
}

// A completion that counts its waits and can fail.
class CountingCompletion final : public PendingCollective::Completion {
 public:
  CountingCompletion(int& waits, bool fail) : waits_(waits), fail_(fail) {}
  void wait() override {
    ++waits_;
    if (fail_) throw Error("collective failed");
  }

 private:
  int& waits_;
  bool fail_;
};

PendingCollective counting(int& waits, bool fail = false) {
  return PendingCollective(std::make_unique<CountingCompletion>(waits, fail));
}

TEST(PendingCollective, WaitsOnceAndIsIdempotent) {
  int waits = 0;
  PendingCollective p = counting(waits);
  EXPECT_TRUE(p.pending());
  p.wait();
  p.wait();
  EXPECT_FALSE(p.pending());
  EXPECT_EQ(waits, 1);
  EXPECT_FALSE(PendingCollective().pending());
}

TEST(PendingCollective, DestroyingAnUnwaitedHandleWaits) {
  int waits = 0;
  { PendingCollective p = counting(waits); }
  EXPECT_EQ(waits, 1);
}

TEST(PendingCollective, MovingHandsOverAndOverwritingWaitsFirst) {
  int first = 0, second = 0;
  PendingCollective a = counting(first);
  PendingCollective b = std::move(a);
  EXPECT_FALSE(a.pending());  // a moved-from handle holds nothing
  EXPECT_EQ(first, 0);
  b = counting(second);  // the collective b held finishes before b takes the new one
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 0);
  b.wait();
  EXPECT_EQ(second, 1);
}

TEST(PendingCollective, AFailedWaitThrowsOnceAndTheDestructorSwallowsIt) {
  int waits = 0;
  PendingCollective p = counting(waits, /*fail=*/true);
  EXPECT_THROW(p.wait(), Error);
  EXPECT_FALSE(p.pending());
  p.wait();  // not retried
  EXPECT_EQ(waits, 1);
  EXPECT_NO_THROW({ PendingCollective q = counting(waits, /*fail=*/true); });
  EXPECT_EQ(waits, 2);
}

}  // namespace
}  // namespace gpt
