#pragma once
// The run loop's view of the compute backend (`--backend cpu|cuda`): which device the model lives on, a device-wide
// synchronization for the training clock (§9.2: the clock reads only after queued GPU work has finished), and
// the peak-memory figures of the `peak memory allocated: … reserved: …` line.
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/tensor.h"

namespace gpt {

// "cpu" -> Device::cpu, "cuda" -> Device::cuda; throws naming --backend for anything else, and for cuda when this
// build has no CUDA backend or no device is visible.
Device backend_device(const std::string& backend);

// Storage dtype of the model's bf16 parameters and activations on `device`: bf16 on CUDA (RECIPE §0.4), f32 on the
// CPU (§R.1: the CPU reference computes in fp32).
inline DType model_dtype(Device device) { return device == Device::cuda ? DType::bf16 : DType::f32; }

// Waits until the device has finished all queued work (no-op on the CPU).
void synchronize_device(Device device);

// Peak allocated / reserved MiB since the last reset: the caching allocator's statistics on CUDA; on the CPU the
// process's peak RSS stands for both.
struct PeakMemoryMib {
  int64_t allocated = 0, reserved = 0;
};
PeakMemoryMib device_peak_memory_mib(Device device);

// Free memory of the CUDA device this process uses (cudaMemGetInfo); nullopt on the CPU or when it cannot be read.
std::optional<int64_t> cuda_free_memory_bytes();

// CUDA devices this process sees (0 in a build without CUDA or without a driver).
int visible_cuda_devices();

// "NVIDIA H200 (sm_90, 139.8 GiB)" for CUDA, "cpu" otherwise: recorded in the run log header.
std::string device_description(Device device);

struct RunEnvironment;
// Fills the GPU fields of a CUDA run's environment (run_log.h) from the device this process uses: its name and UUID,
// the CUDA driver and runtime versions (cudaDriverGetVersion, cudaRuntimeGetVersion), NCCL's version in a build
// with NCCL, and the SM and memory clocks. Where the NVML library can be loaded at run time (it is not linked: a
// machine without it still runs), also the NVIDIA driver version, the current clocks and the enforced power limit.
// Leaves them empty on the CPU.
void describe_gpu(Device device, RunEnvironment& environment);

}  // namespace gpt
