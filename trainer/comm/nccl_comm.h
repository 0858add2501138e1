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
  NcclComm(int rank, int world_size, const ncclUniqueId& id);
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

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int world_ = 1;
  int device_ = 0;
  bool failed_ = false;  // after a failed call the destructor aborts instead of
                         // waiting for peers
  Tensor barrier_token_;
};

}  // namespace gpt

#endif  // SPEEDRUN_HAVE_NCCL
