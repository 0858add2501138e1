// Device memory primitives behind kernels/tensor.h (declared there in namespace gpt::cuda).
//
// A caching pool: cudaMalloc and cudaFree synchronise the device and cost tens of microseconds, so a training
// step that allocates its activations afresh would stall on them. Freed blocks are kept in exact-size buckets
// (sizes rounded up to 512 B, or to 2 MiB above 1 MiB) and handed to the next request of that size; a step
// repeats the previous step's sizes, so after the first step nothing reaches the driver.
// Safety: reuse is ordered by the stream. Ops run on the legacy default stream (runtime.h), so a block freed
// after its last kernel was enqueued can be reused by any later kernel on that stream. Work on other streams
// must synchronise before its tensors are freed.
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/tensor.h"

namespace gpt::cuda {

namespace {

size_t rounded(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{2} << 20;
  return bytes <= (size_t{1} << 20) ? (bytes + kSmall - 1) / kSmall * kSmall : (bytes + kLarge - 1) / kLarge * kLarge;
}

class CachingPool {
 public:
  void* allocate(size_t bytes) {
    const size_t size = rounded(bytes);
    std::lock_guard lock(mutex_);
    void* p = nullptr;
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
    } else {
      cudaError_t err = cudaMalloc(&p, size);
      if (err == cudaErrorMemoryAllocation) {  // give the cache back to the driver and retry once
        (void)cudaGetLastError();
        release_cached_locked();
        err = cudaMalloc(&p, size);
        if (err == cudaErrorMemoryAllocation) {
          (void)cudaGetLastError();
          fail_out_of_memory_locked(size);
        }
      }
      GPT_CUDA_CHECK(err);
      stats_.reserved += size;
      stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
    }
    stats_.allocated += size;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    return p;
  }

  void release(void* p, size_t bytes) noexcept {
    const size_t size = rounded(bytes);
    std::lock_guard lock(mutex_);
    free_[size].push_back(p);
    stats_.allocated -= size;
  }

  MemoryStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  void reset_peaks() {
    std::lock_guard lock(mutex_);
    stats_.peak_allocated = stats_.allocated;
    stats_.peak_reserved = stats_.reserved;
  }

 private:
  // What a failed allocation needed and what held the memory: the request, the live tensors, what the pool still
  // reserves after returning its cache, and the device's own count (other processes' memory included).
  [[noreturn]] void fail_out_of_memory_locked(size_t size) const {
    size_t free_bytes = 0, total_bytes = 0;
    const bool known = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
    (void)cudaGetLastError();
    auto mib = [](size_t b) { return std::to_string((b + (size_t{1} << 20) - 1) >> 20) + " MiB"; };
    GPT_FAIL("CUDA out of memory: could not allocate ", mib(size), " (", size, " bytes); live tensors hold ",
             mib(stats_.allocated), " (peak ", mib(stats_.peak_allocated), "), the pool reserves ",
             mib(stats_.reserved), " after returning its cache to the driver; the device has ",
             known ? mib(free_bytes) + " free of " + mib(total_bytes) : std::string("an unknown amount free"));
  }

  void release_cached_locked() noexcept {
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) cudaFree(p);
      stats_.reserved -= size * blocks.size();
      blocks.clear();
    }
  }

  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
  MemoryStats stats_;
};

// Never destroyed: tensors may outlive static destruction order, and the driver reclaims memory at exit.
CachingPool& pool() {
  static CachingPool* instance = new CachingPool();  // NOLINT: intentionally leaked process-lifetime singleton
  return *instance;
}

}  // namespace

void* malloc_device(size_t bytes) { return pool().allocate(bytes); }
void free_device(void* ptr, size_t bytes) noexcept { pool().release(ptr, bytes); }
MemoryStats memory_stats() { return pool().stats(); }
void reset_peak_memory_stats() { pool().reset_peaks(); }

void copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes) {
  cudaMemcpyKind kind = dst_on_device ? (src_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                      : (src_on_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  GPT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
}

void memset_zero(void* ptr, size_t bytes) { GPT_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, nullptr)); }

bool available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace gpt::cuda
