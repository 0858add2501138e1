// The NCCL communicator on the device: at W = 1 every collective must give bitwise the single-rank
// communicator's result (on the same data, for every dtype it takes); error reporting; the CUDA-backend
// communicator make_comm builds at W = 1; at W = 2 (only when two devices are visible) every collective against
// the thread-rank communicator on the CPU; the collective watchdog (quiet at W = 1, an abort at W = 2).
#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <span>
#include <thread>

#include "kernels/cuda/runtime.h"
#include "tests/gpu/gpu_test_util.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/comm_factory.h"
#include "trainer/comm/mpi_comm.h"

#ifdef SPEEDRUN_HAVE_NCCL
#include "trainer/comm/nccl_comm.h"
#endif

namespace gpt {
namespace {

// Rank-dependent data; integers for integer dtypes (small enough that sums never overflow).
Tensor rank_data(const Shape& shape, DType dtype, int rank, uint64_t seed) {
  Tensor t = testing::random_tensor(shape, DType::f64, seed * 31 + static_cast<uint64_t>(rank), 3.0);
  const std::vector<double> v = t.to_doubles();
  if (dtype == DType::i32 || dtype == DType::i64) {
    Tensor out = Tensor::empty(shape, dtype);
    for (size_t i = 0; i < v.size(); ++i) {
      const auto x = static_cast<int64_t>(std::round(v[i] * 1000.0));
      if (dtype == DType::i32) {
        out.data<int32_t>()[i] = static_cast<int32_t>(x);
      } else {
        out.data<int64_t>()[i] = x;
      }
    }
    return out;
  }
  return Tensor::from_doubles(v, shape, dtype);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(Device::cpu), hb = b.to(Device::cpu);
  return ha.dtype() == hb.dtype() && ha.nbytes() == hb.nbytes() && std::memcmp(ha.raw(), hb.raw(), ha.nbytes()) == 0;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

constexpr DType kReductionTypes[] = {DType::f64, DType::f32, DType::bf16, DType::i32, DType::i64};
constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max};

// Every collective of `comm` (CUDA tensors) against `reference` (CPU tensors of the same values), which must have
// the same rank and world size; `exact` demands bitwise equality, else the dtype tolerance of gpu_test_util.h.
void expect_same_collectives(Comm& comm, Comm& reference, bool exact) {
  const int world = comm.world_size(), rank = comm.rank();
  const int64_t n = 6;  // chunk elements
  auto expect_match = [&](const Tensor& got, const Tensor& want, const std::string& what) {
    if (exact || want.dtype() == DType::i32 || want.dtype() == DType::i64) {
      EXPECT_TRUE(bitwise_equal(got, want)) << what << " (rank " << rank << ")";
    } else {
      EXPECT_LE(gpu_testing::relative_frobenius(got, want), gpu_testing::tolerance_for(want.dtype()))
          << what << " (rank " << rank << ")";
    }
  };
  uint64_t seed = 1;
  for (DType dtype : kReductionTypes) {
    for (ReduceOp op : kOps) {
      const std::string what = std::string(dtype_name(dtype)) + " op " + std::to_string(static_cast<int>(op));
      Tensor host = rank_data({world * n, 3}, dtype, rank, ++seed);
      Tensor dev = host.to(Device::cuda);
      comm.all_reduce(dev, op);
      reference.all_reduce(host, op);
      expect_match(dev, host, "all_reduce " + what);

      const Tensor in_host = rank_data({world * n}, dtype, rank, ++seed);
      const Tensor in_dev = in_host.to(Device::cuda);
      Tensor out_host = Tensor::empty({n}, dtype), out_dev = Tensor::empty({n}, dtype, Device::cuda);
      gpu_testing::poison(out_dev);
      comm.reduce_scatter(in_dev, out_dev, op);
      reference.reduce_scatter(in_host, out_host, op);
      expect_match(out_dev, out_host, "reduce_scatter " + what);

      // In place: the output is the rank's own chunk of the input.
      Tensor whole_host = in_host.clone(), whole_dev = in_host.to(Device::cuda);
      Tensor chunk_host = whole_host.view({world, n}).slice(rank, rank + 1),
             chunk_dev = whole_dev.view({world, n}).slice(rank, rank + 1);
      comm.reduce_scatter(whole_dev, chunk_dev, op);
      reference.reduce_scatter(whole_host, chunk_host, op);
      expect_match(chunk_dev, chunk_host, "in-place reduce_scatter " + what);
    }
  }
  // Byte-moving collectives take every dtype, fp8 and u8 included.
  for (DType dtype : {DType::f64, DType::bf16, DType::i32, DType::u8, DType::e4m3}) {
    const std::string what = dtype_name(dtype);
    Tensor in_host = Tensor::empty({n, 2}, dtype);
    auto* bytes = static_cast<uint8_t*>(in_host.raw());
    for (size_t i = 0; i < in_host.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 13 * rank + 1);
    const Tensor in_dev = in_host.to(Device::cuda);
    Tensor out_host = Tensor::empty({world * n, 2}, dtype),
           out_dev = Tensor::empty({world * n, 2}, dtype, Device::cuda);
    gpu_testing::poison(out_dev);
    comm.all_gather(in_dev, out_dev);
    reference.all_gather(in_host, out_host);
    EXPECT_TRUE(bitwise_equal(out_dev, out_host)) << "all_gather " << what;

    Tensor gathered_host = Tensor::zeros({world * n, 2}, dtype);
    gathered_host.view({world, n, 2}).slice(rank, rank + 1).copy_from(in_host.view({1, n, 2}));
    Tensor gathered_dev = gathered_host.to(Device::cuda);
    Tensor own_dev = gathered_dev.view({world, n, 2}).slice(rank, rank + 1);
    comm.all_gather(own_dev, gathered_dev);
    EXPECT_TRUE(bitwise_equal(gathered_dev, out_host)) << "in-place all_gather " << what;

    for (int root = 0; root < world; ++root) {
      Tensor b_host = in_host.clone(), b_dev = in_host.to(Device::cuda);
      comm.broadcast(b_dev, root);
      reference.broadcast(b_host, root);
      EXPECT_TRUE(bitwise_equal(b_dev, b_host)) << "broadcast " << what << " root " << root;
    }
  }
  comm.barrier();
  reference.barrier();
}

#ifdef SPEEDRUN_HAVE_NCCL

std::filesystem::path fresh_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "nccl-test-XXXXXX").string();
  EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
  return pattern;
}

TEST(NcclComm, WorldOneEqualsTheSingleRankComm) {
  GPT_REQUIRE_CUDA();
  RendezvousOptions rendezvous;
  rendezvous.dir = fresh_dir();
  NcclComm comm(0, 1, exchange_nccl_id(0, 1, rendezvous));  // rank 0 publishes the id through the directory
  EXPECT_TRUE(std::filesystem::exists(rendezvous.dir / "nccl-unique-id"));
  std::filesystem::remove_all(rendezvous.dir);
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world_size(), 1);
  auto single = make_single_rank_comm();
  expect_same_collectives(comm, *single, true);
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
}

// The id path of ranks started by mpirun or srun (comm_factory.h): rank 0's id through MPI, here at W = 1 (an MPI
// singleton), then the same collectives as the single-rank communicator.
TEST(NcclComm, IdThroughMpiAtWorldOneEqualsTheSingleRankComm) {
  GPT_REQUIRE_CUDA();
  if (!mpi_available()) GTEST_SKIP() << "this build found no MPI";
  ncclUniqueId id = new_nccl_id();
  mpi_broadcast_bytes(std::as_writable_bytes(std::span(id.internal)), 0, 1);
  NcclComm comm(0, 1, id);
  auto single = make_single_rank_comm();
  expect_same_collectives(comm, *single, true);
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST(NcclComm, RunsOnTheCurrentStream) {
  GPT_REQUIRE_CUDA();
  NcclComm comm(0, 1, new_nccl_id());
  cuda::Stream stream(/*non_blocking=*/true);
  const cuda::StreamGuard guard(stream.get());
  // Producer, collective and consumer all on a stream that does not synchronize with the default one: the
  // result is right only if the collective is ordered between them.
  Tensor src = rank_data({1 << 20}, DType::f32, 0, 5).to(Device::cuda);
  Tensor a = Tensor::empty({1 << 20}, DType::f32, Device::cuda), b = Tensor::empty({1 << 20}, DType::f32, Device::cuda);
  for (int i = 0; i < 4; ++i) {
    GPT_CUDA_CHECK(cudaMemsetAsync(a.raw(), 0xFF, a.nbytes(), stream.get()));
    GPT_CUDA_CHECK(cudaMemcpyAsync(a.raw(), src.raw(), a.nbytes(), cudaMemcpyDeviceToDevice, stream.get()));
    comm.all_reduce(a, ReduceOp::sum);
    Tensor whole = a, chunk = b;
    comm.reduce_scatter(whole, chunk, ReduceOp::avg);
    stream.synchronize();
    EXPECT_TRUE(bitwise_equal(b, src));
  }
}

// The async path at W = 1 on a stream that does not synchronize with the default one: each collective is issued
// after a producer on the compute stream and waited (in reverse order, or by destroying the handle) before a
// consumer there; the results equal the blocking calls' bitwise.
TEST(NcclComm, AsyncCollectivesAtWorldOneEqualTheBlockingOnes) {
  GPT_REQUIRE_CUDA();
  NcclComm comm(0, 1, new_nccl_id());
  cuda::Stream stream(/*non_blocking=*/true);
  const cuda::StreamGuard guard(stream.get());
  const int64_t n = 1 << 20;
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor src = rank_data({n}, dtype, 0, 9).to(Device::cuda);
    auto produce = [&](Tensor& t) {
      GPT_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0xFF, t.nbytes(), stream.get()));
      GPT_CUDA_CHECK(cudaMemcpyAsync(t.raw(), src.raw(), t.nbytes(), cudaMemcpyDeviceToDevice, stream.get()));
    };
    Tensor want_reduced = Tensor::empty({n}, dtype, Device::cuda),
           want_scattered = Tensor::empty({n}, dtype, Device::cuda),
           want_gathered = Tensor::empty({n}, dtype, Device::cuda);
    produce(want_reduced);
    comm.all_reduce(want_reduced, ReduceOp::avg);
    comm.reduce_scatter(src, want_scattered, ReduceOp::avg);
    comm.all_gather(src, want_gathered);
    for (bool destroy_unwaited : {false, true}) {
      Tensor reduced = Tensor::empty({n}, dtype, Device::cuda), scattered = Tensor::empty({n}, dtype, Device::cuda),
             gathered = Tensor::empty({n}, dtype, Device::cuda);
      produce(reduced);
      Tensor scatter_in = Tensor::empty({n}, dtype, Device::cuda), gather_in = Tensor::empty({n}, dtype, Device::cuda);
      produce(scatter_in);
      produce(gather_in);
      {
        PendingCollective r = comm.all_reduce_async(reduced, ReduceOp::avg);
        PendingCollective s = comm.reduce_scatter_async(scatter_in, scattered, ReduceOp::avg);
        PendingCollective g = comm.all_gather_async(gather_in, gathered);
        if (!destroy_unwaited) {
          g.wait();
          s.wait();
          r.wait();
        }
      }
      // Consumers on the compute stream: copies that must see the collectives' results.
      Tensor seen_reduced = Tensor::empty({n}, dtype, Device::cuda),
             seen_gathered = Tensor::empty({n}, dtype, Device::cuda);
      GPT_CUDA_CHECK(
          cudaMemcpyAsync(seen_reduced.raw(), reduced.raw(), reduced.nbytes(), cudaMemcpyDeviceToDevice, stream.get()));
      GPT_CUDA_CHECK(cudaMemcpyAsync(seen_gathered.raw(), gathered.raw(), gathered.nbytes(), cudaMemcpyDeviceToDevice,
                                     stream.get()));
      stream.synchronize();
      const std::string what = std::string(dtype_name(dtype)) + (destroy_unwaited ? " (destroyed unwaited)" : "");
      EXPECT_TRUE(bitwise_equal(seen_reduced, want_reduced)) << "all_reduce " << what;
      EXPECT_TRUE(bitwise_equal(scattered, want_scattered)) << "reduce_scatter " << what;
      EXPECT_TRUE(bitwise_equal(seen_gathered, want_gathered)) << "all_gather " << what;
    }
  }
  comm.barrier();
}

TEST(NcclComm, ErrorsNameTheProblem) {
  GPT_REQUIRE_CUDA();
  NcclComm comm(0, 1, new_nccl_id());
  Tensor host = Tensor::zeros({4}, DType::f32);
  EXPECT_NE(error_of([&] { comm.all_reduce(host, ReduceOp::sum); }).find("CUDA tensors"), std::string::npos);
  Tensor dev = Tensor::zeros({4}, DType::f32, Device::cuda), small = Tensor::zeros({3}, DType::f32, Device::cuda);
  EXPECT_NE(error_of([&] { comm.reduce_scatter(dev, small, ReduceOp::sum); }).find("world_size (1)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { comm.all_gather(small, dev); }).find("world_size (1)"), std::string::npos);
  EXPECT_NE(error_of([&] { comm.broadcast(dev, 1); }).find("root 1"), std::string::npos);
  Tensor bytes = Tensor::zeros({4}, DType::u8, Device::cuda);
  EXPECT_NE(error_of([&] { comm.all_reduce(bytes, ReduceOp::max); }).find("dtype u8"), std::string::npos);
  const std::string nccl = error_of([] { check_nccl(ncclInvalidArgument, "ncclFrobnicate(x)"); });
  EXPECT_NE(nccl.find("ncclInvalidArgument"), std::string::npos) << nccl;
  EXPECT_NE(nccl.find("ncclFrobnicate(x)"), std::string::npos) << nccl;
  EXPECT_NE(nccl.find(ncclGetErrorString(ncclInvalidArgument)), std::string::npos) << nccl;
  EXPECT_THROW(NcclComm(1, 1, new_nccl_id()), Error);
}

TEST(NcclComm, WorldTwoMatchesThreadRanks) {
  GPT_REQUIRE_CUDA();
  int devices = 0;
  GPT_CUDA_CHECK(cudaGetDeviceCount(&devices));
  if (devices < 2) GTEST_SKIP() << "W = 2 needs 2 visible CUDA devices, found " << devices;
  const ncclUniqueId id = new_nccl_id();
  ThreadRankGroup reference(2);
  std::vector<std::exception_ptr> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        GPT_CUDA_CHECK(cudaSetDevice(r));
        NcclComm comm(r, 2, id);
        auto ref = reference.comm(r);
        // Two-term sums round once in both, and NCCL's avg (pre-multiplied by 1/2) is exact: bitwise.
        expect_same_collectives(comm, *ref, true);
        GPT_CUDA_CHECK(cudaDeviceSynchronize());
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// The collective watchdog at W = 1: every collective finishes, so a short timeout never fires over many calls and
// a barrier (which waits on the host) leaves nothing pending.
TEST(NcclComm, WatchdogStaysQuietWhileCollectivesFinish) {
  GPT_REQUIRE_CUDA();
  NcclComm comm(0, 1, new_nccl_id(), std::chrono::milliseconds(2000));
  Tensor t = rank_data({1 << 16}, DType::f32, 0, 7).to(Device::cuda);
  for (int i = 0; i < 50; ++i) comm.all_reduce(t, ReduceOp::sum);
  comm.barrier();
  EXPECT_NO_THROW(comm.all_reduce(t, ReduceOp::sum));
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
}

// W = 2 with a peer that never joins: rank 1 skips the all_reduce rank 0 issued. Rank 0's watchdog aborts after
// its timeout, the barrier's host wait returns, and the call throws naming the collective and the setting.
TEST(NcclComm, WatchdogAbortsACollectiveAPeerNeverJoins) {
  GPT_REQUIRE_CUDA();
  int devices = 0;
  GPT_CUDA_CHECK(cudaGetDeviceCount(&devices));
  if (devices < 2) GTEST_SKIP() << "W = 2 needs 2 visible CUDA devices, found " << devices;
  const ncclUniqueId id = new_nccl_id();
  std::string rank0_error;
  std::atomic<bool> rank0_done{false};
  std::thread rank1([&] {
    GPT_CUDA_CHECK(cudaSetDevice(1));
    NcclComm comm(1, 2, id, std::chrono::milliseconds(60'000));
    while (!rank0_done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });  // rank 1's communicator is destroyed with rank 0's collective never matched
  {
    GPT_CUDA_CHECK(cudaSetDevice(0));
    NcclComm comm(0, 2, id, std::chrono::milliseconds(1500));
    Tensor t = Tensor::zeros({1024}, DType::f32, Device::cuda);
    comm.all_reduce(t, ReduceOp::sum);
    rank0_error = error_of([&] { comm.barrier(); });
  }
  rank0_done = true;
  rank1.join();
  EXPECT_NE(rank0_error.find("NCCL all_reduce (rank 0 of 2) waited"), std::string::npos) << rank0_error;
  EXPECT_NE(rank0_error.find("SPEEDRUN_COLLECTIVE_TIMEOUT_S=1.5 s"), std::string::npos) << rank0_error;
}

#else

TEST(NcclComm, NotBuilt) { GTEST_SKIP() << "this CUDA build found no NCCL (see cmake/nccl_comm.cmake, NCCL_ROOT)"; }

#endif  // SPEEDRUN_HAVE_NCCL

TEST(CudaCommFactory, WorldOneIsTheSingleRankCommOnCudaTensors) {
  GPT_REQUIRE_CUDA();
  auto comm = make_comm(LaunchEnv{}, Device::cuda, [](const std::string&) { return std::optional<std::string>(); });
  EXPECT_EQ(comm->world_size(), 1);
  auto single = make_single_rank_comm();
  expect_same_collectives(*comm, *single, true);
}

}  // namespace
}  // namespace gpt
