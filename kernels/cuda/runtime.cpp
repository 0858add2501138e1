#include "kernels/cuda/runtime.h"

#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace gpt::cuda {

// ---- Stream -----------------------------------------------------------------------------------------

Stream::Stream(bool non_blocking, int priority) {
  cudaStream_t stream = nullptr;
  GPT_CUDA_CHECK(
      cudaStreamCreateWithPriority(&stream, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault, priority));
  stream_.reset(stream);
}

void Stream::synchronize() const { GPT_CUDA_CHECK(cudaStreamSynchronize(get())); }

// ---- Event ------------------------------------------------------------------------------------------

Event::Event(bool timing) {
  cudaEvent_t event = nullptr;
  GPT_CUDA_CHECK(cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
  event_.reset(event);
}

void Event::record(cudaStream_t stream) { GPT_CUDA_CHECK(cudaEventRecord(get(), stream)); }

void Event::synchronize() const { GPT_CUDA_CHECK(cudaEventSynchronize(get())); }

bool Event::done() const {
  const cudaError_t err = cudaEventQuery(get());
  if (err == cudaErrorNotReady) return false;
  GPT_CUDA_CHECK(err);
  return true;
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  GPT_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
  return ms;
}

void stream_wait(cudaStream_t stream, const Event& event) {
  GPT_CUDA_CHECK(cudaStreamWaitEvent(stream, event.get(), 0));
}

// ---- current stream ---------------------------------------------------------------------------------

namespace {
thread_local cudaStream_t tls_current_stream = nullptr;  // nullptr = legacy default stream
}  // namespace

cudaStream_t current_stream() { return tls_current_stream; }

int multiprocessor_count() {
  static const int count = [] {
    int device = 0, sms = 0;
    GPT_CUDA_CHECK(cudaGetDevice(&device));
    GPT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return count;
}

StreamGuard::StreamGuard(cudaStream_t stream) : previous_(std::exchange(tls_current_stream, stream)) {}
StreamGuard::~StreamGuard() { tls_current_stream = previous_; }

// ---- pinned host memory -----------------------------------------------------------------------------

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  GPT_CUDA_CHECK(cudaMallocHost(&data_, bytes == 0 ? 1 : bytes));
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void copy_to_device_async(Tensor& dst, const PinnedBuffer& src, size_t offset, cudaStream_t stream) {
  GPT_CHECK(dst.device() == Device::cuda, "copy_to_device_async: destination must be a CUDA tensor, got ",
            dst.describe());
  GPT_CHECK(offset + dst.nbytes() <= src.bytes(), "copy_to_device_async: ", dst.nbytes(), " bytes from offset ", offset,
            " overrun the pinned buffer of ", src.bytes(), " bytes");
  GPT_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), static_cast<const char*>(src.data()) + offset, dst.nbytes(),
                                 cudaMemcpyHostToDevice, stream));
}

void copy_to_host_async(PinnedBuffer& dst, size_t offset, const Tensor& src, cudaStream_t stream) {
  GPT_CHECK(src.device() == Device::cuda, "copy_to_host_async: source must be a CUDA tensor, got ", src.describe());
  GPT_CHECK(offset + src.nbytes() <= dst.bytes(), "copy_to_host_async: ", src.nbytes(), " bytes at offset ", offset,
            " overrun the pinned buffer of ", dst.bytes(), " bytes");
  GPT_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst.data()) + offset, src.raw(), src.nbytes(),
                                 cudaMemcpyDeviceToHost, stream));
}

// ---- device properties ------------------------------------------------------------------------------

const cudaDeviceProp& device_properties() {
  static std::mutex mutex;
  static std::map<int, cudaDeviceProp> cache;
  int device = 0;
  GPT_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard lock(mutex);
  auto it = cache.find(device);
  if (it == cache.end()) {
    cudaDeviceProp prop{};
    GPT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    it = cache.emplace(device, prop).first;
  }
  return it->second;
}

void* stream_ordered_alloc(size_t bytes, cudaStream_t stream) {
  static std::mutex mutex;
  static std::set<int> retaining;
  int device = 0;
  GPT_CUDA_CHECK(cudaGetDevice(&device));
  {
    const std::lock_guard lock(mutex);
    if (retaining.insert(device).second) {
      cudaMemPool_t pool = nullptr;
      GPT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
      uint64_t keep_all = UINT64_MAX;
      GPT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
    }
  }
  void* p = nullptr;
  const cudaError_t rc = cudaMallocAsync(&p, bytes, stream);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();  // an out-of-memory here is not sticky: leave the device usable for the caller
    GPT_FAIL("stream-ordered scratch of ", bytes, " bytes on device ", device, ": ", cudaGetErrorString(rc));
  }
  return p;
}

}  // namespace gpt::cuda
