#pragma once
// The NCCL communicator of the CUDA backend (RECIPE §8): one process per GPU.
// Every collective runs on the communicator's own stream (non-blocking, high
// priority), after an event recorded on the calling thread's
// gpt::cuda::current_stream() (the compute stream): the collective sees every
// kernel issued before it. The blocking calls then make the compute stream
// wait for the collective's completion event, so kernels after them see its
// results (no host synchronization except in barrier()); the *_async calls
// return a handle whose wait() does that later, so the compute stream runs on
// meanwhile (the backward overlaps the gradient reductions). One stream for
// every collective keeps them in issue order on the device, the order every
// rank shares.
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

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "trainer/comm/collective_watchdog.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/rendezvous.h"

namespace gpt {

namespace cuda {
class Stream;
}

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
  // wait(): the current stream waits for the collective's completion event,
  // then the watchdog's verdict is checked (it throws when the watchdog fired).
  PendingCollective all_reduce_async(Tensor& t, ReduceOp op) override;
  PendingCollective reduce_scatter_async(const Tensor& input, Tensor& output, ReduceOp op) override;
  PendingCollective all_gather_async(const Tensor& input, Tensor& output) override;
  // A one-element all-reduce, then the host waits for the current stream: every
  // rank has passed the same point.
  void barrier() override;

 private:
  void check_device(const char* op) const;
  void check(ncclResult_t result, const char* call);
  // After the watchdog's verdict, makes the comm stream wait for the current
  // stream, runs `enqueue(comm stream)` (one NCCL call) under the call lock,
  // hands the watchdog an event recorded behind it and returns the handle that
  // waits for that event (keeping `tensors` alive until then).
  template <typename Enqueue>
  PendingCollective issue(const char* op, std::vector<Tensor> tensors, Enqueue&& enqueue);
  void abort_from_watchdog();

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int world_ = 1;
  int device_ = 0;
  bool failed_ = false;  // after a failed call the destructor aborts instead of
                         // waiting for peers
  Tensor barrier_token_;
  std::unique_ptr<cuda::Stream> comm_stream_;
  // Held while a call enqueues and while the watchdog aborts, so that comm_ is
  // never used after ncclCommAbort freed it (the watchdog waits at most a
  // second for it: a call stuck inside NCCL is what the abort is for).
  std::timed_mutex calls_;
  // Written by the watchdog, which aborts even when it could not take calls_ within its second (a call stuck
  // inside NCCL holds it), so it is atomic rather than guarded by the lock.
  std::atomic<bool> aborted_{false};
  std::unique_ptr<CollectiveWatchdog> watchdog_;  // last: its thread uses the members above
};

}  // namespace gpt

#endif  // SPEEDRUN_HAVE_NCCL

#include <string>

namespace gpt {

// NCCL's version ("2.27.3", from ncclGetVersion) in a build with NCCL; "" in one without (or when NCCL cannot tell).
std::string nccl_version();

}  // namespace gpt
