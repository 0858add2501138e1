#pragma once
// RAII for the CUDA runtime objects the backend uses: streams, events, pinned host buffers, and the
// per-thread "current stream" every CUDA op launches on.
//
// Ops take no stream argument: they run on gpt::cuda::current_stream(), which is the legacy default stream
// unless a StreamGuard says otherwise. Streams created here are blocking (they synchronize with the legacy
// default stream), so the synchronous Tensor copies of kernels/tensor.h stay ordered with kernel work.
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/tensor.h"

namespace gpt::cuda {

// Deleters of the owning handles below: a moved-from Stream or Event holds none and destroys nothing.
struct DestroyStream {
  void operator()(cudaStream_t stream) const noexcept { cudaStreamDestroy(stream); }
};
struct DestroyEvent {
  void operator()(cudaEvent_t event) const noexcept { cudaEventDestroy(event); }
};

// Move-only.
class Stream {
 public:
  // non_blocking: does not synchronize with the legacy default stream (use only when every copy is explicit).
  // priority: lower numbers are higher priority (cudaDeviceGetStreamPriorityRange); 0 is the default.
  explicit Stream(bool non_blocking = false, int priority = 0);

  cudaStream_t get() const { return stream_.get(); }
  void synchronize() const;

 private:
  std::unique_ptr<std::remove_pointer_t<cudaStream_t>, DestroyStream> stream_;
};

// Move-only.
class Event {
 public:
  // timing = false makes record/wait cheaper (cudaEventDisableTiming); elapsed_ms needs timing = true.
  explicit Event(bool timing = false);

  cudaEvent_t get() const { return event_.get(); }
  void record(cudaStream_t stream);
  void synchronize() const;
  bool done() const;  // cudaEventQuery: true when all work before the record has finished
  // Milliseconds from `start` to `end` (both recorded with timing = true and finished).
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, DestroyEvent> event_;
};

// Makes `stream` wait (on the device) for everything recorded in `event`.
void stream_wait(cudaStream_t stream, const Event& event);

// The stream CUDA ops of this thread launch on.
cudaStream_t current_stream();

// Streaming multiprocessors of the current device (read once): grids of grid-stride kernels are sized from it.
int multiprocessor_count();

// Sets the current stream of this thread for its lifetime and restores the previous one after.
class StreamGuard {
 public:
  explicit StreamGuard(cudaStream_t stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  cudaStream_t previous_;
};

// Page-locked host memory: the only kind an asynchronous host<->device copy overlaps with kernels.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  std::span<T> as() {
    return {static_cast<T*>(data_), bytes_ / sizeof(T)};
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Asynchronous copies between a pinned buffer (from byte `offset`) and a whole CUDA tensor, on `stream`.
// The caller keeps both alive and unchanged until the stream has passed the copy (record an Event).
void copy_to_device_async(Tensor& dst, const PinnedBuffer& src, size_t offset, cudaStream_t stream);
void copy_to_host_async(PinnedBuffer& dst, size_t offset, const Tensor& src, cudaStream_t stream);

// Properties of the current device, read once per device.
const cudaDeviceProp& device_properties();

// cudaMallocAsync on `stream` from the current device's default pool, which is first told (once per device) to keep
// freed memory instead of returning it to the driver at every synchronisation: per-call scratch (attention, the
// reductions' partial sums) then costs no mapping of fresh memory after the first call of a shape.
void* stream_ordered_alloc(size_t bytes, cudaStream_t stream);

}  // namespace gpt::cuda
