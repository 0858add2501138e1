#include "trainer/run/backend.h"

#include <sstream>

#include "trainer/run/run_log.h"

#ifdef SPEEDRUN_HAVE_CUDA
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "trainer/comm/nccl_comm.h"
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

#ifdef SPEEDRUN_HAVE_CUDA
namespace {

// "13.0" from a CUDA version number (1000 * major + 10 * minor).
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// "GPU-8-4-4-4-12" hex, as nvidia-smi and NVML write a GPU's UUID.
std::string uuid_text(const cudaUUID_t& uuid) {
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
    if (i == 3 || i == 5 || i == 7 || i == 9) text += '-';
  }
  return text;
}

// What NVML tells of one GPU, read through the library found at run time (never linked). Only the entry points
// of NVML's C API used here, with the types it documents (nvmlReturn_t an int, 0 for success; a device handle
// an opaque pointer; clock type 1 the SM clock, 2 the memory clock; power in milliwatts).
struct NvmlReport {
  std::string driver, clocks, power_limit;
};

NvmlReport read_nvml(const std::string& uuid) {
  NvmlReport report;
  void* library = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return report;
  using Init = int (*)();
  using Shutdown = int (*)();
  using DriverVersion = int (*)(char*, unsigned);
  using HandleByUuid = int (*)(const char*, void**);
  using Clock = int (*)(void*, int, unsigned*);
  using PowerLimit = int (*)(void*, unsigned*);
  const auto init = reinterpret_cast<Init>(::dlsym(library, "nvmlInit_v2"));
  const auto shutdown = reinterpret_cast<Shutdown>(::dlsym(library, "nvmlShutdown"));
  if (init != nullptr && shutdown != nullptr && init() == 0) {
    char driver[96] = {};
    if (const auto get = reinterpret_cast<DriverVersion>(::dlsym(library, "nvmlSystemGetDriverVersion"));
        get != nullptr && get(driver, sizeof driver) == 0) {
      report.driver = driver;
    }
    void* device = nullptr;
    const auto by_uuid = reinterpret_cast<HandleByUuid>(::dlsym(library, "nvmlDeviceGetHandleByUUID"));
    if (by_uuid != nullptr && by_uuid(uuid.c_str(), &device) == 0) {
      const auto current = reinterpret_cast<Clock>(::dlsym(library, "nvmlDeviceGetClockInfo"));
      const auto most = reinterpret_cast<Clock>(::dlsym(library, "nvmlDeviceGetMaxClockInfo"));
      const auto clock_text = [&](const char* name, int type) -> std::string {
        unsigned now = 0, max = 0;
        const bool has_now = current != nullptr && current(device, type, &now) == 0;
        const bool has_max = most != nullptr && most(device, type, &max) == 0;
        if (!has_now && !has_max) return "";
        std::string text = std::string(name) + " " + std::to_string(has_now ? now : max) + " MHz";
        if (has_now && has_max) text += " (max " + std::to_string(max) + ")";
        return text;
      };
      const std::string sm = clock_text("sm", 1), memory = clock_text("memory", 2);
      report.clocks = sm + (!sm.empty() && !memory.empty() ? ", " : "") + memory;
      unsigned milliwatts = 0;
      if (const auto limit = reinterpret_cast<PowerLimit>(::dlsym(library, "nvmlDeviceGetEnforcedPowerLimit"));
          limit != nullptr && limit(device, &milliwatts) == 0) {
        report.power_limit = std::to_string(milliwatts / 1000) + " W";
      }
    }
    shutdown();
  }
  ::dlclose(library);
  return report;
}

}  // namespace
#endif

void describe_gpu(Device device, RunEnvironment& environment) {
  if (device != Device::cuda) return;
#ifdef SPEEDRUN_HAVE_CUDA
  const cudaDeviceProp& prop = cuda::device_properties();
  environment.gpu = prop.name;
  environment.gpu_uuid = uuid_text(prop.uuid);
  int version = 0;
  if (cudaDriverGetVersion(&version) == cudaSuccess) environment.driver = "CUDA " + cuda_version_text(version);
  if (cudaRuntimeGetVersion(&version) == cudaSuccess) environment.cuda = cuda_version_text(version);
  environment.nccl = nccl_version();
  int gpu = 0, sm_khz = 0, memory_khz = 0;
  if (cudaGetDevice(&gpu) == cudaSuccess && cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, gpu) == cudaSuccess &&
      cudaDeviceGetAttribute(&memory_khz, cudaDevAttrMemoryClockRate, gpu) == cudaSuccess) {
    environment.gpu_clocks =
        "sm max " + std::to_string(sm_khz / 1000) + " MHz, memory max " + std::to_string(memory_khz / 1000) + " MHz";
  }
  const NvmlReport nvml = read_nvml(environment.gpu_uuid);
  if (!nvml.driver.empty()) environment.driver = "NVIDIA " + nvml.driver + " (" + environment.driver + ")";
  if (!nvml.clocks.empty()) environment.gpu_clocks = nvml.clocks;
  environment.gpu_power_limit = nvml.power_limit;
#else
  (void)environment;
#endif
}

}  // namespace gpt
