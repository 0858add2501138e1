#include "trainer/comm/nccl_comm.h"

#include <string>

#ifdef SPEEDRUN_HAVE_NCCL

#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "kernels/cuda/runtime.h"

namespace gpt {

namespace {

const char* result_name(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult(unknown)";
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::avg:
      return ncclAvg;
    case ReduceOp::max:
      return ncclMax;
  }
  GPT_FAIL("NCCL: unknown ReduceOp ", static_cast<int>(op));
}

// The dtypes a reduction accepts (the same set as the CPU communicators).
ncclDataType_t reduction_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::f64:
      return ncclFloat64;
    case DType::f32:
      return ncclFloat32;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    default:
      GPT_FAIL(op, ": NCCL reduction of dtype ", dtype_name(dtype), " is not supported (f64, f32, bf16, i32, i64)");
  }
}

void check_chunks(const Tensor& whole, const Tensor& chunk, int world, const char* op) {
  GPT_CHECK(whole.dtype() == chunk.dtype(), op, ": dtypes differ (", whole.describe(), " vs ", chunk.describe(), ")");
  GPT_CHECK(whole.numel() == chunk.numel() * world, op, ": the whole tensor must hold world_size (", world,
            ") × the chunk's elements, got ", whole.describe(), " and ", chunk.describe());
  GPT_CHECK(whole.device() == Device::cuda && chunk.device() == Device::cuda, op,
            ": the NCCL communicator takes CUDA tensors, got ", whole.describe(), " and ", chunk.describe());
}

void check_cuda_tensor(const Tensor& t, const char* op) {
  GPT_CHECK(t.device() == Device::cuda, op, ": the NCCL communicator takes CUDA tensors, got ", t.describe());
}

// A collective on the comm stream: the waiting stream waits for its completion event (no host wait), then the
// watchdog's verdict is read. The tensors stay alive until then: the device memory pool hands freed blocks to the
// compute stream's next kernels, which must come after the collective.
class NcclCompletion final : public PendingCollective::Completion {
 public:
  NcclCompletion(std::shared_ptr<cuda::Event> done, std::vector<Tensor> tensors, const CollectiveWatchdog& watchdog)
      : done_(std::move(done)), tensors_(std::move(tensors)), watchdog_(watchdog) {}
  void wait() override {
    cuda::stream_wait(cuda::current_stream(), *done_);
    tensors_.clear();
    watchdog_.throw_if_fired();
  }

 private:
  std::shared_ptr<cuda::Event> done_;
  std::vector<Tensor> tensors_;
  const CollectiveWatchdog& watchdog_;
};

}  // namespace

void check_nccl(ncclResult_t result, const char* call, ncclComm_t comm) {
  if (result == ncclSuccess) return;
  const char* detail = ncclGetLastError(comm);
  GPT_FAIL("NCCL error ", result_name(result), " (", ncclGetErrorString(result), ") in ", call,
           detail != nullptr && *detail != '\0' ? std::string(": ") + detail : std::string());
}

ncclUniqueId new_nccl_id() {
  ncclUniqueId id;
  GPT_NCCL_CHECK(ncclGetUniqueId(&id));
  return id;
}

ncclUniqueId exchange_nccl_id(int rank, int world_size, const RendezvousOptions& rendezvous) {
  static constexpr const char* kName = "nccl-unique-id";
  ncclUniqueId id;
  if (rank == 0) {
    id = new_nccl_id();
    publish_blob(rendezvous, kName, std::as_bytes(std::span(id.internal)), world_size);
  } else {
    const std::vector<std::byte> blob = wait_for_blob(rendezvous, kName, sizeof(id.internal), world_size);
    std::memcpy(id.internal, blob.data(), sizeof(id.internal));
  }
  return id;
}

NcclComm::NcclComm(int rank, int world_size, const ncclUniqueId& id, std::chrono::milliseconds collective_timeout)
    : rank_(rank), world_(world_size) {
  GPT_CHECK(world_size >= 1, "NcclComm: world size must be >= 1, got ", world_size);
  GPT_CHECK(rank >= 0 && rank < world_size, "NcclComm: rank ", rank, " outside [0, ", world_size, ")");
  GPT_CUDA_CHECK(cudaGetDevice(&device_));
  // Non-blocking: a blocking stream would serialise with the legacy default stream the kernels run on, and no
  // collective could overlap them. High priority: its kernels get SMs ahead of the compute kernels they overlap.
  int least_priority = 0, greatest_priority = 0;
  GPT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  comm_stream_ = std::make_unique<cuda::Stream>(/*non_blocking=*/true, greatest_priority);
  check_nccl(ncclCommInitRank(&comm_, world_size, id, rank), "ncclCommInitRank");
  barrier_token_ = Tensor::zeros({1}, DType::i32, Device::cuda);
  CollectiveWatchdogHooks hooks;
  hooks.thread_start = [device = device_] { cudaSetDevice(device); };
  hooks.async_error = [this]() -> std::optional<std::string> {
    std::unique_lock lock(calls_, std::try_to_lock);  // skip a poll rather than wait behind an enqueue
    if (!lock.owns_lock() || aborted_) return std::nullopt;
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess || async == ncclSuccess || async == ncclInProgress) {
      return std::nullopt;
    }
    return std::string(result_name(async)) + ": " + ncclGetErrorString(async);
  };
  hooks.abort = [this] { abort_from_watchdog(); };
  watchdog_ = std::make_unique<CollectiveWatchdog>(collective_timeout, std::move(hooks));
}

NcclComm::~NcclComm() {
  watchdog_.reset();  // no abort can race with the teardown below
  if (comm_ == nullptr || aborted_) return;
  // A failed call or an exception on its way out may mean a peer is gone: abort
  // rather than wait for it.
  if (failed_ || std::uncaught_exceptions() > 0) {
    ncclCommAbort(comm_);
    return;
  }
  if (cudaStreamSynchronize(comm_stream_->get()) != cudaSuccess || ncclCommFinalize(comm_) != ncclSuccess) {
    ncclCommAbort(comm_);
    return;
  }
  ncclCommDestroy(comm_);
}

void NcclComm::abort_from_watchdog() {
  std::unique_lock lock(calls_, std::defer_lock);
  (void)lock.try_lock_for(std::chrono::seconds(1));
  if (aborted_.exchange(true)) return;
  ncclCommAbort(comm_);
}

template <typename Enqueue>
PendingCollective NcclComm::issue(const char* op, std::vector<Tensor> tensors, Enqueue&& enqueue) {
  watchdog_->throw_if_fired();
  const cudaStream_t stream = comm_stream_->get();
  {
    // The inputs are written by kernels already issued on the compute stream. (Destroying the event at once is
    // fine: the wait has captured it.)
    cuda::Event inputs_ready;
    inputs_ready.record(cuda::current_stream());
    cuda::stream_wait(stream, inputs_ready);
  }
  auto done = std::make_shared<cuda::Event>();
  {
    std::lock_guard lock(calls_);
    GPT_CHECK(!aborted_, op, ": the NCCL communicator was aborted by the collective watchdog");
    std::forward<Enqueue>(enqueue)(stream);
    done->record(stream);
  }
  // Every collective is on the one comm stream, so they finish in issue order: the watchdog's premise.
  watchdog_->watch(
      std::string("NCCL ") + op + " (rank " + std::to_string(rank_) + " of " + std::to_string(world_) + ")",
      [done] { return done->done(); });
  return PendingCollective(std::make_unique<NcclCompletion>(std::move(done), std::move(tensors), *watchdog_));
}

void NcclComm::check(ncclResult_t result, const char* call) {
  if (result != ncclSuccess) failed_ = true;
  check_nccl(result, call, comm_);
}

void NcclComm::check_device(const char* op) const {
  int current = -1;
  GPT_CUDA_CHECK(cudaGetDevice(&current));
  GPT_CHECK(current == device_, op, ": the NCCL communicator of CUDA device ", device_, " was called while device ",
            current, " is current");
}

PendingCollective NcclComm::all_reduce_async(Tensor& t, ReduceOp op) {
  check_device("all_reduce");
  check_cuda_tensor(t, "all_reduce");
  const ncclDataType_t type = reduction_type(t.dtype(), "all_reduce");
  return issue("all_reduce", {t}, [&](cudaStream_t stream) {
    check(ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), type, nccl_op(op), comm_, stream),
          "ncclAllReduce");
  });
}

PendingCollective NcclComm::reduce_scatter_async(const Tensor& input, Tensor& output, ReduceOp op) {
  check_device("reduce_scatter");
  check_chunks(input, output, world_, "reduce_scatter");
  const ncclDataType_t type = reduction_type(input.dtype(), "reduce_scatter");
  return issue("reduce_scatter", {input, output}, [&](cudaStream_t stream) {
    check(ncclReduceScatter(input.raw(), output.raw(), static_cast<size_t>(output.numel()), type, nccl_op(op), comm_,
                            stream),
          "ncclReduceScatter");
  });
}

PendingCollective NcclComm::all_gather_async(const Tensor& input, Tensor& output) {
  check_device("all_gather");
  check_chunks(output, input, world_, "all_gather");
  return issue("all_gather", {input, output}, [&](cudaStream_t stream) {
    check(ncclAllGather(input.raw(), output.raw(), input.nbytes(), ncclUint8, comm_, stream), "ncclAllGather");
  });
}

void NcclComm::all_reduce(Tensor& t, ReduceOp op) { all_reduce_async(t, op).wait(); }

void NcclComm::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  reduce_scatter_async(input, output, op).wait();
}

void NcclComm::all_gather(const Tensor& input, Tensor& output) { all_gather_async(input, output).wait(); }

void NcclComm::broadcast(Tensor& t, int root) {
  GPT_CHECK(root >= 0 && root < world_, "broadcast: root ", root, " outside [0, ", world_, ")");
  check_device("broadcast");
  check_cuda_tensor(t, "broadcast");
  issue("broadcast", {t}, [&](cudaStream_t stream) {
    check(ncclBroadcast(t.raw(), t.raw(), t.nbytes(), ncclUint8, root, comm_, stream), "ncclBroadcast");
  }).wait();
}

void NcclComm::barrier() {
  check_device("barrier");
  issue("barrier", {}, [&](cudaStream_t stream) {
    check(ncclAllReduce(barrier_token_.raw(), barrier_token_.raw(), 1, ncclInt32, ncclSum, comm_, stream),
          "ncclAllReduce (barrier)");
  }).wait();
  // An abort by the watchdog makes the stuck kernel return: the wait ends, and the verdict names the collective.
  GPT_CUDA_CHECK(cudaStreamSynchronize(cuda::current_stream()));
  watchdog_->throw_if_fired();
}

}  // namespace gpt

#endif  // SPEEDRUN_HAVE_NCCL

namespace gpt {

std::string nccl_version() {
#ifdef SPEEDRUN_HAVE_NCCL
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess || code <= 0) return "";
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9, major * 1000 + minor * 100 + patch before.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
#else
  return "";
#endif
}

}  // namespace gpt
