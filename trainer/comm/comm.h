#pragma once
// Collectives between the ranks of one run (RECIPE §8), NCCL-shaped: every call takes contiguous tensors, every
// rank calls the same collectives in the same order with the same counts and dtypes, chunked collectives need
// element counts divisible by the world size. Implementations: a single rank (no communication) and in-process
// thread ranks sharing a rendezvous (CPU tests of sharding); NCCL (one process per GPU) implements the same
// interface in the CUDA backend.
//
// Reductions run in rank order 0, 1, …, W−1 in fp32 (double for f64) and are rounded once to the tensor's dtype,
// so every rank gets bitwise the same result.
//
// Asynchronous collectives (*_async) return a PendingCollective: the CPU communicators complete them at issue (so
// their ordered, bitwise-reproducible reductions stay as they are); NCCL runs them on its own stream, overlapped
// with the caller's compute stream until wait(). Issue order is the collective order every rank must share, waits
// may come in any order.
#include <memory>
#include <string>

#include "base/check.h"
#include "kernels/tensor.h"

namespace gpt {

enum class ReduceOp { sum, avg, max };

// Thrown by a collective of a multi-process communicator when another rank reported a failure (notify_failure)
// while this one waited: the run ends with the failing rank's exit status and names it.
class PeerFailure : public Error {
 public:
  PeerFailure(int rank, int exit_code, const std::string& reason)
      : Error("rank " + std::to_string(rank) + ": " + reason), rank_(rank), exit_code_(exit_code) {}
  int rank() const { return rank_; }
  int exit_code() const { return exit_code_; }

 private:
  int rank_;
  int exit_code_;
};

// An issued collective whose results may not have landed yet. wait() returns once work the caller issues next may
// read the outputs and reuse the inputs: at once for communicators that complete at issue; for NCCL the caller's
// current CUDA stream waits for the collective (the host does not). wait() is idempotent and handles may be waited
// in any order. A handle destroyed unwaited waits then (errors there are dropped: a failed collective is reported
// by the communicator's next call), so no collective is left running behind its caller's back. A handle must not
// outlive its communicator; the communicator keeps the tensors' storage alive until the wait.
class PendingCollective {
 public:
  // What an unfinished collective does when waited for (called at most once).
  class Completion {
   public:
    virtual ~Completion() = default;
    virtual void wait() = 0;
  };

  PendingCollective() = default;  // completed at issue
  explicit PendingCollective(std::unique_ptr<Completion> completion) : completion_(std::move(completion)) {}
  PendingCollective(PendingCollective&&) noexcept = default;
  PendingCollective& operator=(PendingCollective&& other) noexcept;  // finishes the collective it held first
  PendingCollective(const PendingCollective&) = delete;
  PendingCollective& operator=(const PendingCollective&) = delete;
  ~PendingCollective();

  void wait();
  bool pending() const { return completion_ != nullptr; }

 private:
  void finish_quietly() noexcept;
  std::unique_ptr<Completion> completion_;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // t ← op over ranks of t (in place).
  virtual void all_reduce(Tensor& t, ReduceOp op) = 0;
  // input: W·n elements on every rank; output: n elements, chunk `rank` of the reduction. output may be the
  // rank's own chunk of input (in place, as NCCL allows).
  virtual void reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) = 0;
  // input: n elements; output: W·n elements, chunk q = rank q's input. input may be the rank's own chunk of output.
  virtual void all_gather(const Tensor& input, Tensor& output) = 0;
  // t ← root's t.
  virtual void broadcast(Tensor& t, int root) = 0;
  virtual void barrier() = 0;

  // The same collectives, issued now and finished by the handle (argument rules as above; the tensors must stay
  // untouched by the caller until the wait). The default completes them at issue through the blocking calls.
  virtual PendingCollective all_reduce_async(Tensor& t, ReduceOp op) {
    all_reduce(t, op);
    return {};
  }
  virtual PendingCollective reduce_scatter_async(const Tensor& input, Tensor& output, ReduceOp op) {
    reduce_scatter(input, output, op);
    return {};
  }
  virtual PendingCollective all_gather_async(const Tensor& input, Tensor& output) {
    all_gather(input, output);
    return {};
  }

  // Multi-process transports: tells the other ranks that this one failed, so that their next (or current)
  // collective throws PeerFailure instead of waiting for it. Nothing to do where the ranks share a process.
  virtual void notify_failure(int exit_code, const std::string& reason) {}
  // Multi-process transports, after a failure, once rank 0 has written what it must: ends every rank of the job
  // with `exit_code` (no rank is left waiting in a collective). Returns where there is nothing to end.
  virtual void end_job_after_failure(int exit_code) {}
};

// World size 1: collectives are copies (or nothing).
std::unique_ptr<Comm> make_single_rank_comm();

// W thread ranks in one process. Create the group once, hand comm(r) to the thread running rank r.
class ThreadRankGroup {
 public:
  explicit ThreadRankGroup(int world_size);
  ~ThreadRankGroup();
  ThreadRankGroup(const ThreadRankGroup&) = delete;
  ThreadRankGroup& operator=(const ThreadRankGroup&) = delete;

  int world_size() const;
  std::unique_ptr<Comm> comm(int rank);

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace gpt
