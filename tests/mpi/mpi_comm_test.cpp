// MpiComm between processes: every collective gives bitwise the thread ranks' results (rank-order reductions),
// a rank's failure note reaches the others as PeerFailure naming it, and the watchdog ends a collective that a
// rank never joins. The parent tests start this test binary under mpirun; the `MpiCommChild` tests run only there
// (SPEEDRUN_MPI_CHILD set) and report through their exit status or a file.
#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "base/check.h"
#include "mpi_test_util.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/mpi_comm.h"

namespace gpt {
namespace {

using namespace std::chrono_literals;

bool in_child() { return std::getenv("SPEEDRUN_MPI_CHILD") != nullptr; }

int launched_world() {
  const char* w = std::getenv("OMPI_COMM_WORLD_SIZE");
  return w == nullptr ? 1 : std::atoi(w);
}

Tensor rank_input(int rank, int64_t n, DType dtype) {
  std::mt19937 gen(1000 + static_cast<unsigned>(rank));
  std::normal_distribution<double> dist(0.0, 3.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(gen);
  return Tensor::from_doubles(v, {n}, dtype);
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return {p, p + t.nbytes()};
}

// What rank `rank` gets from `collective` according to the thread ranks (all W inputs rebuilt here).
template <typename Collective>
std::vector<uint8_t> thread_rank_result(int world, int rank, Collective collective) {
  ThreadRankGroup group(world);
  std::vector<std::vector<uint8_t>> results(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int q = 0; q < world; ++q) {
    threads.emplace_back([&, q] {
      auto comm = group.comm(q);
      results[static_cast<size_t>(q)] = collective(*comm);
    });
  }
  for (auto& t : threads) t.join();
  return results[static_cast<size_t>(rank)];
}

TEST(MpiCommChild, CollectivesEqualThreadRanksBitwise) {
  if (!in_child()) GTEST_SKIP() << "runs under mpirun (started by MpiComm.* tests)";
  const int world = launched_world();
  auto comm = make_mpi_comm(world, 60s);
  ASSERT_EQ(comm->world_size(), world);
  const int rank = comm->rank();
  const int64_t n = 6 * world;  // divisible by the world size for the chunked collectives
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      auto all_reduce = [&](Comm& c) {
        Tensor t = rank_input(c.rank(), n, dtype);
        c.all_reduce(t, op);
        return bytes_of(t);
      };
      EXPECT_EQ(all_reduce(*comm), thread_rank_result(world, rank, all_reduce)) << dtype_name(dtype);
      auto reduce_scatter = [&](Comm& c) {
        Tensor in = rank_input(c.rank(), n, dtype);
        Tensor out = Tensor::zeros({n / c.world_size()}, dtype);
        c.reduce_scatter(in, out, op);
        return bytes_of(out);
      };
      EXPECT_EQ(reduce_scatter(*comm), thread_rank_result(world, rank, reduce_scatter)) << dtype_name(dtype);
    }
    auto all_gather = [&](Comm& c) {
      Tensor in = rank_input(c.rank(), 5, dtype);
      Tensor out = Tensor::zeros({5 * c.world_size()}, dtype);
      c.all_gather(in, out);
      return bytes_of(out);
    };
    EXPECT_EQ(all_gather(*comm), thread_rank_result(world, rank, all_gather));
    auto broadcast = [&](Comm& c) {
      Tensor t = rank_input(c.rank(), 7, dtype);
      c.broadcast(t, c.world_size() - 1);
      return bytes_of(t);
    };
    EXPECT_EQ(broadcast(*comm), thread_rank_result(world, rank, broadcast));
    // The asynchronous collectives, waited in reverse order, against the thread ranks' blocking ones.
    Tensor reduced = rank_input(rank, n, dtype);
    const Tensor scatter_in = rank_input(rank, n, dtype);
    Tensor scattered = Tensor::zeros({n / world}, dtype);
    const Tensor gather_in = rank_input(rank, 5, dtype);
    Tensor gathered = Tensor::zeros({5 * world}, dtype);
    {
      PendingCollective r = comm->all_reduce_async(reduced, ReduceOp::avg);
      PendingCollective s = comm->reduce_scatter_async(scatter_in, scattered, ReduceOp::avg);
      PendingCollective g = comm->all_gather_async(gather_in, gathered);
      g.wait();
      s.wait();
      r.wait();
    }
    auto blocking = [&](ReduceOp op) {
      return [&, op](Comm& c) {
        Tensor t = rank_input(c.rank(), n, dtype);
        c.all_reduce(t, op);
        return bytes_of(t);
      };
    };
    EXPECT_EQ(bytes_of(reduced), thread_rank_result(world, rank, blocking(ReduceOp::avg))) << dtype_name(dtype);
    auto blocking_scatter = [&](Comm& c) {
      Tensor in = rank_input(c.rank(), n, dtype);
      Tensor out = Tensor::zeros({n / c.world_size()}, dtype);
      c.reduce_scatter(in, out, ReduceOp::avg);
      return bytes_of(out);
    };
    EXPECT_EQ(bytes_of(scattered), thread_rank_result(world, rank, blocking_scatter)) << dtype_name(dtype);
    EXPECT_EQ(bytes_of(gathered), thread_rank_result(world, rank, all_gather)) << dtype_name(dtype);
  }
  // Ranks that disagree on the count throw together instead of corrupting memory.
  Tensor t = Tensor::zeros({rank == 0 ? 3 : 4}, DType::f32);
  EXPECT_THROW(comm->all_reduce(t, ReduceOp::sum), Error);
  comm->barrier();
}

// Rank 1 fails (or, for the watchdog, never arrives); rank 0 writes what its barrier threw into $RESULT_FILE and
// ends the job.
TEST(MpiCommChild, FaultReachesRankZero) {
  if (!in_child()) GTEST_SKIP() << "runs under mpirun (started by MpiComm.* tests)";
  const std::string mode = std::getenv("FAULT_MODE");
  auto comm = make_mpi_comm(launched_world(), mode == "watchdog" ? 1s : 60s);
  if (comm->rank() == 1) {
    if (mode == "note") comm->notify_failure(3, "injected failure");
    if (mode == "watchdog") std::this_thread::sleep_for(30s);
    comm->end_job_after_failure(1);
  }
  std::string caught = "nothing";
  int code = 0;
  try {
    comm->barrier();
  } catch (const PeerFailure& e) {
    caught = std::string("PeerFailure rank=") + std::to_string(e.rank()) + " code=" + std::to_string(e.exit_code()) +
             " " + e.what();
    code = e.exit_code();
  } catch (const Error& e) {
    caught = std::string("Error ") + e.what();
    code = 1;
  }
  std::ofstream(std::getenv("RESULT_FILE")) << caught << "\n";
  comm->end_job_after_failure(code);
}

class MpiComm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (in_child()) GTEST_SKIP() << "parent test";
    SKIP_WITHOUT_MPIRUN();
    scratch_ = std::filesystem::temp_directory_path() / ("mpi_comm_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(scratch_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!scratch_.empty()) std::filesystem::remove_all(scratch_, ec);
  }
  test::Shell child(int ranks, const std::string& filter, const std::string& env = "") {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    return test::run_shell("env SPEEDRUN_MPI_CHILD=1 " + env + " " + test::mpirun_prefix(ranks) + self +
                               " --gtest_color=no --gtest_filter=" + filter,
                           scratch_, 120);
  }
  std::string result() const {
    std::ifstream in(scratch_ / "result.txt");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::filesystem::path scratch_;
};

TEST_F(MpiComm, CollectivesEqualThreadRanksAtTwoAndFourRanks) {
  for (int ranks : {2, 4}) {
    const test::Shell s = child(ranks, "MpiCommChild.CollectivesEqualThreadRanksBitwise");
    EXPECT_EQ(s.exit_code, 0) << ranks << " ranks:\n" << s.output;
    EXPECT_NE(s.output.find("[  PASSED  ] 1 test"), std::string::npos) << s.output;
  }
}

TEST_F(MpiComm, FailureNoteNamesTheRankAndItsStatus) {
  const test::Shell s = child(2, "MpiCommChild.FaultReachesRankZero",
                              "FAULT_MODE=note RESULT_FILE=" + (scratch_ / "result.txt").string());
  EXPECT_EQ(s.exit_code, 3) << s.output;
  EXPECT_LT(s.seconds, 30);
  EXPECT_NE(result().find("PeerFailure rank=1 code=3 rank 1: injected failure"), std::string::npos) << result();
}

TEST_F(MpiComm, WatchdogEndsACollectiveARankNeverJoins) {
  const test::Shell s = child(2, "MpiCommChild.FaultReachesRankZero",
                              "FAULT_MODE=watchdog RESULT_FILE=" + (scratch_ / "result.txt").string());
  EXPECT_EQ(s.exit_code, 1) << s.output;
  EXPECT_LT(s.seconds, 25) << "rank 0 should give up after the 1 s watchdog, not wait for rank 1's 30 s";
  EXPECT_NE(result().find("watchdog timeout"), std::string::npos) << result();
}

}  // namespace
}  // namespace gpt
