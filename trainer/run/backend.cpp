#include "trainer/run/backend.h"

#include <sstream>

#include "trainer/run/run_log.h"

#ifdef SPEEDRUN_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#endif

namespace gpt {

Device backend_device(const std::string& backend) {
  if (backend == "cpu") return Device::cpu;
  GPT_CHECK(backend == "cuda", "--backend ", backend, ": expected cpu or cuda");
#ifndef SPEEDRUN_HAVE_CUDA
  GPT_FAIL("--backend cuda: this build has no CUDA backend (configure with `cmake --preset cuda` where nvcc exists)");
#else
  GPT_CHECK(cuda_available(), "--backend cuda: no CUDA device is visible");
  return Device::cuda;
#endif
}

std::optional<int64_t> cuda_free_memory_bytes() {
#ifdef SPEEDRUN_HAVE_CUDA
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return std::nullopt;
  return static_cast<int64_t>(free);
#else
  return std::nullopt;
#endif
}

int visible_cuda_devices() {
#ifdef SPEEDRUN_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
#else
  return 0;
#endif
}

void synchronize_device(Device device) {
  if (device == Device::cpu) return;
#ifdef SPEEDRUN_HAVE_CUDA
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
#endif
}

PeakMemoryMib device_peak_memory_mib(Device device) {
  if (device == Device::cpu) {
    const int64_t rss = peak_rss_mib();
    return {rss, rss};
  }
  const MemoryStats stats = memory_stats(device);
  constexpr size_t kMiB = size_t{1} << 20;
  return {static_cast<int64_t>(stats.peak_allocated / kMiB), static_cast<int64_t>(stats.peak_reserved / kMiB)};
}

std::string device_description(Device device) {
  if (device == Device::cpu) return "cpu";
#ifdef SPEEDRUN_HAVE_CUDA
  const cudaDeviceProp& prop = cuda::device_properties();
  std::ostringstream out;
  out.precision(1);
  out << prop.name << " (sm_" << prop.major << prop.minor << ", " << std::fixed
      << static_cast<double>(prop.totalGlobalMem) / static_cast<double>(size_t{1} << 30) << " GiB)";
  return out.str();
#else
  return "cuda (not in this build)";
#endif
}

}  // namespace gpt
