#pragma once
// The NCCL communicator of the CUDA backend (RECIPE §8): one process per GPU,
// every collective enqueued on the calling thread's
// gpt::cuda::current_stream(), so it is ordered with the kernels before and
// after it exactly as they are ordered with each other (no host synchronization
// except in barrier()).
//
// Semantics are those of comm.h with two differences NCCL imposes: tensors must
// be CUDA tensors on the device that was current when the communicator was
// made, and reductions follow NCCL's own order and precision (ring/tree order;
// bf16 partial sums rounded to bf16 between hops), so for W > 1 they are not
// bitwise the rank-order fp32 results of the CPU communicators. At W = 1 every
// collective is an exact copy, equal to the single-rank comm. avg is ncclAvg
// (integers: sum, then truncating division). all_gather and broadcast move raw
// bytes, so they take every dtype; reductions take f64, f32, bf16, i32, i64.
//
// Compiled only when the build found NCCL (SPEEDRUN_HAVE_NCCL).
#ifdef SPEEDRUN_HAVE_NCCL

#include <nccl.h>

#include <memory>
#include <mutex>

#include "trainer/comm/collective_watchdog.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/rendezvous.h"

namespace gpt {

// Throws gpt::Error naming the NCCL call, the result's name and
// ncclGetErrorString (plus ncclGetLastError of `comm` when given) unless result
// is ncclSuccess.
void check_nccl(ncclResult_t result, const char* call, ncclComm_t comm = nullptr);

#define GPT_NCCL_CHECK(expr) ::gpt::check_nccl((expr), #expr)

// A fresh ncclUniqueId (rank 0 makes it; everybody else must receive it, e.g.
// through publish_nccl_id).
ncclUniqueId new_nccl_id();

// The id through the rendezvous directory: rank 0 makes and publishes it, the
// other ranks wait for it.
ncclUniqueId exchange_nccl_id(int rank, int world_size, const RendezvousOptions& rendezvous);

class NcclComm final : public Comm {
 public:
  // Joins the group of `world_size` ranks named by `id` on the current CUDA
  // device; blocks until every rank has joined (ncclCommInitRank). Several
  // communicators in one process need one thread per rank and device.
  // Every collective is watched (collective_watchdog.h): one that has not
  // finished after `collective_timeout` aborts the communicator, and the next
  // call on this rank throws the reason.
  NcclComm(int rank, int world_size, const ncclUniqueId& id,
           std::chrono::milliseconds collective_timeout = kDefaultCollectiveTimeout);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  int device() const { return device_; }

  void all_reduce(Tensor& t, ReduceOp op) override;
  void reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) override;
  void all_gather(const Tensor& input, Tensor& output) override;
  void broadcast(Tensor& t, int root) override;
  // A one-element all-reduce, then the host waits for the current stream: every
  // rank has passed the same point.
  void barrier() override;

 private:
  void check_device(const char* op) const;
  void check(ncclResult_t result, const char* call);
  // Runs `enqueue` (one NCCL call on the current stream) under the call lock,
  // after the watchdog's verdict, then hands the watchdog an event recorded
  // behind it.
  template <typename Enqueue>
  void issue(const char* op, Enqueue&& enqueue);
  void abort_from_watchdog();

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int world_ = 1;
  int device_ = 0;
  bool failed_ = false;  // after a failed call the destructor aborts instead of
                         // waiting for peers
  Tensor barrier_token_;
  // Held while a call enqueues and while the watchdog aborts, so that comm_ is
  // never used after ncclCommAbort freed it (the watchdog waits at most a
  // second for it: a call stuck inside NCCL is what the abort is for).
  std::timed_mutex calls_;
  bool aborted_ = false;  // guarded by calls_
  std::unique_ptr<CollectiveWatchdog> watchdog_;  // last: its thread uses the members above
};

}  // namespace gpt

#endif  // SPEEDRUN_HAVE_NCCL
