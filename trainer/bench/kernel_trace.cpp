// CUPTI activity recorder of trainer/bench/kernel_trace.h. CUPTI hands out filled buffers through C callbacks, so
// the records are gathered into one process-wide collector guarded by a mutex.
#include "trainer/bench/kernel_trace.h"

#include <cuda_runtime.h>
#include <cupti.h>
#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "base/check.h"

namespace gpt {

namespace {

#define GPT_CUPTI_CHECK(call)                                                              \
  do {                                                                                     \
    const CUptiResult status_ = (call);                                                    \
    if (status_ != CUPTI_SUCCESS) {                                                        \
      const char* text_ = nullptr;                                                         \
      cuptiGetResultString(status_, &text_);                                               \
      GPT_FAIL("CUPTI: ", #call, " failed: ", text_ != nullptr ? text_ : "unknown error"); \
    }                                                                                      \
  } while (0)

constexpr size_t kBufferBytes = 8u << 20;  // CUPTI asks for buffers one at a time; 8 MiB holds ≈ 40k kernel records

struct Collector {
  std::mutex mutex;
  std::vector<ActivityInterval> intervals;
  size_t dropped = 0;
};

Collector& collector() {
  static Collector c;
  return c;
}

std::string demangle(const char* name) {
  if (name == nullptr) return "<unnamed kernel>";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

const char* copy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "[memcpy HtoD]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "[memcpy DtoH]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "[memcpy DtoD]";
    default:
      return "[memcpy other]";
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid_bytes) {
  Collector& c = collector();
  std::vector<ActivityInterval> got;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        got.push_back({ActivityKind::kernel, demangle(k->name), k->start, k->end});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        got.push_back({ActivityKind::memcpy, copy_name(m->copyKind), m->start, m->end});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        got.push_back({ActivityKind::memset, "[memset]", m->start, m->end});
        break;
      }
      default:
        break;
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped);
  std::free(buffer);
  const std::lock_guard lock(c.mutex);
  c.dropped += dropped;
  for (ActivityInterval& a : got) c.intervals.push_back(std::move(a));
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

}  // namespace

KernelTrace::KernelTrace() {
  static std::once_flag registered;
  std::call_once(registered,
                 [] { GPT_CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)); });
}

KernelTrace::~KernelTrace() {
  if (!recording_) return;
  for (CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
}

void KernelTrace::start() {
  GPT_CHECK(!recording_, "KernelTrace: start() while recording");
  GPT_CHECK(cudaDeviceSynchronize() == cudaSuccess, "KernelTrace: the device failed before the trace");
  {
    const std::lock_guard lock(collector().mutex);
    collector().intervals.clear();
    collector().dropped = 0;
  }
  for (CUpti_ActivityKind kind : kKinds) GPT_CUPTI_CHECK(cuptiActivityEnable(kind));
  recording_ = true;
}

std::vector<ActivityInterval> KernelTrace::stop() {
  GPT_CHECK(recording_, "KernelTrace: stop() without start()");
  GPT_CHECK(cudaDeviceSynchronize() == cudaSuccess, "KernelTrace: the device failed during the trace");
  for (CUpti_ActivityKind kind : kKinds) GPT_CUPTI_CHECK(cuptiActivityDisable(kind));
  recording_ = false;
  GPT_CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  const std::lock_guard lock(collector().mutex);
  return std::move(collector().intervals);
}

size_t KernelTrace::dropped() const {
  const std::lock_guard lock(collector().mutex);
  return collector().dropped;
}

}  // namespace gpt
