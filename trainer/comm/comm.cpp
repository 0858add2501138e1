#include "trainer/comm/comm.h"

#include "trainer/comm/rank_order_reduce.h"

#include <barrier>
#include <cstring>
#include <vector>

namespace gpt {

PendingCollective& PendingCollective::operator=(PendingCollective&& other) noexcept {
  if (this != &other) {
    finish_quietly();
    completion_ = std::move(other.completion_);
  }
  return *this;
}

PendingCollective::~PendingCollective() { finish_quietly(); }

void PendingCollective::wait() {
  // Taken out first: a wait that throws is not retried by the destructor.
  if (std::unique_ptr<Completion> completion = std::move(completion_)) completion->wait();
}

void PendingCollective::finish_quietly() noexcept {
  try {
    wait();
  } catch (...) {  // the communicator reports the failure at its next call
  }
}

namespace {

void check_chunk_shapes(const Tensor& whole, const Tensor& chunk, int world, const char* op) {
  GPT_CHECK(whole.dtype() == chunk.dtype(), op, ": dtypes differ (", whole.describe(), " vs ", chunk.describe(), ")");
  GPT_CHECK(whole.numel() == chunk.numel() * world, op, ": the whole tensor must hold world_size (", world,
            ") × the chunk's elements, got ", whole.describe(), " and ", chunk.describe());
  GPT_CHECK(whole.device() == chunk.device(), op, ": tensors on different devices (", whole.describe(), " vs ",
            chunk.describe(), ")");
}

void check_chunked(const Tensor& whole, const Tensor& chunk, int world, const char* op) {
  check_chunk_shapes(whole, chunk, world, op);
  GPT_CHECK(whole.is_cpu() && chunk.is_cpu(), op, ": this communicator handles CPU tensors only");
}

// The single rank serves either backend (the CUDA backend at W = 1 needs no NCCL): its copies go through
// device_copy, which is ordered with the CUDA work of the legacy default stream and the blocking streams.
void copy_unless_same(const Tensor& src, Tensor& dst) {
  if (src.raw() != dst.raw()) device_copy(dst.raw(), dst.device(), src.raw(), src.device(), dst.nbytes());
}

class SingleRankComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce(Tensor&, ReduceOp) override {}
  void reduce_scatter(const Tensor& input, Tensor& output, ReduceOp) override {
    check_chunk_shapes(input, output, 1, "reduce_scatter");
    copy_unless_same(input, output);
  }
  void all_gather(const Tensor& input, Tensor& output) override {
    check_chunk_shapes(output, input, 1, "all_gather");
    copy_unless_same(input, output);
  }
  void broadcast(Tensor&, int root) override { GPT_CHECK(root == 0, "broadcast: root ", root, " outside [0, 1)"); }
  void barrier() override {}
};

}  // namespace

struct ThreadRankGroup::Shared {
  explicit Shared(int w) : world(w), sync(w), slots(static_cast<size_t>(w)) {}
  struct Slot {
    const void* in = nullptr;
    void* out = nullptr;
    int64_t count = 0;  // elements of the rank's input
    DType dtype = DType::f32;
  };
  int world;
  std::barrier<> sync;
  std::vector<Slot> slots;
};

namespace {

class ThreadRankComm final : public Comm {
 public:
  ThreadRankComm(std::shared_ptr<ThreadRankGroup::Shared> shared, int rank) : s_(std::move(shared)), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return s_->world; }

  void all_reduce(Tensor& t, ReduceOp op) override {
    GPT_CHECK(t.is_cpu(), "all_reduce: this communicator handles CPU tensors only");
    publish(t.raw(), t.raw(), t.numel(), t.dtype(), "all_reduce");
    std::vector<uint8_t> result(t.nbytes());
    reduce_in_rank_order(t.dtype(), inputs(), 0, t.numel(), op, result.data());
    s_->sync.arrive_and_wait();  // everyone has read every buffer
    std::memcpy(t.raw(), result.data(), result.size());
    s_->sync.arrive_and_wait();
  }

  void reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) override {
    check_chunked(input, output, s_->world, "reduce_scatter");
    publish(input.raw(), output.raw(), input.numel(), input.dtype(), "reduce_scatter");
    // Rank r reads only chunk r of every input, and writes only its own output (possibly chunk r of its own
    // input): no other rank touches that range, so a private buffer is enough.
    const int64_t n = output.numel();
    std::vector<uint8_t> result(output.nbytes());
    reduce_in_rank_order(input.dtype(), inputs(), rank_ * n, (rank_ + 1) * n, op, result.data());
    std::memcpy(output.raw(), result.data(), result.size());
    s_->sync.arrive_and_wait();
  }

  void all_gather(const Tensor& input, Tensor& output) override {
    check_chunked(output, input, s_->world, "all_gather");
    publish(input.raw(), output.raw(), input.numel(), input.dtype(), "all_gather");
    // Rank r writes chunk q of its own output from rank q's input; an in-place input (chunk q of rank q's
    // output) is never written by rank q itself, so reads and writes never overlap.
    const size_t bytes = input.nbytes();
    for (int q = 0; q < s_->world; ++q) {
      uint8_t* dst = static_cast<uint8_t*>(output.raw()) + static_cast<size_t>(q) * bytes;
      const void* src = s_->slots[static_cast<size_t>(q)].in;
      if (dst != src) std::memcpy(dst, src, bytes);
    }
    s_->sync.arrive_and_wait();
  }

  void broadcast(Tensor& t, int root) override {
    GPT_CHECK(root >= 0 && root < s_->world, "broadcast: root ", root, " outside [0, ", s_->world, ")");
    GPT_CHECK(t.is_cpu(), "broadcast: this communicator handles CPU tensors only");
    publish(t.raw(), t.raw(), t.numel(), t.dtype(), "broadcast");
    if (rank_ != root) std::memcpy(t.raw(), s_->slots[static_cast<size_t>(root)].in, t.nbytes());
    s_->sync.arrive_and_wait();
  }

  void barrier() override { s_->sync.arrive_and_wait(); }

 private:
  // Posts this rank's buffers, waits for all ranks, and checks that every rank called with the same count and
  // dtype (all ranks see the same slots, so all of them throw together instead of dead-locking).
  void publish(const void* in, void* out, int64_t count, DType dtype, const char* op) {
    s_->slots[static_cast<size_t>(rank_)] = {in, out, count, dtype};
    s_->sync.arrive_and_wait();
    for (const auto& slot : s_->slots) {
      GPT_CHECK(slot.count == count && slot.dtype == dtype, op, ": ranks disagree on the element count or dtype (",
                count, " ", dtype_name(dtype), " vs ", slot.count, " ", dtype_name(slot.dtype), ")");
    }
  }

  std::vector<const void*> inputs() const {
    std::vector<const void*> out;
    for (const auto& slot : s_->slots) out.push_back(slot.in);
    return out;
  }

  std::shared_ptr<ThreadRankGroup::Shared> s_;
  int rank_;
};

}  // namespace

std::unique_ptr<Comm> make_single_rank_comm() { return std::make_unique<SingleRankComm>(); }

ThreadRankGroup::ThreadRankGroup(int world_size) {
  GPT_CHECK(world_size >= 1, "ThreadRankGroup: world size must be >= 1, got ", world_size);
  shared_ = std::make_shared<Shared>(world_size);
}
ThreadRankGroup::~ThreadRankGroup() = default;

int ThreadRankGroup::world_size() const { return shared_->world; }

std::unique_ptr<Comm> ThreadRankGroup::comm(int rank) {
  GPT_CHECK(rank >= 0 && rank < shared_->world, "ThreadRankGroup: rank ", rank, " outside [0, ", shared_->world, ")");
  return std::make_unique<ThreadRankComm>(shared_, rank);
}

}  // namespace gpt
