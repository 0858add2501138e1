#pragma once
// Collectives between the ranks of one run (RECIPE §8), NCCL-shaped: every call takes contiguous tensors, every
// rank calls the same collectives in the same order with the same counts and dtypes, chunked collectives need
// element counts divisible by the world size. Implementations: a single rank (no communication) and in-process
// thread ranks sharing a rendezvous (CPU tests of sharding); NCCL (one process per GPU) implements the same
// interface in the CUDA backend.
//
// Reductions run in rank order 0, 1, …, W−1 in fp32 (double for f64) and are rounded once to the tensor's dtype,
// so every rank gets bitwise the same result.
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
