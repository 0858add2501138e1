// GPU activity of a stretch of host code, recorded through CUPTI's activity API (kernels, memcpys, memsets with
// their device timestamps; kernels keep running concurrently, no replay, no serialisation, clocks left alone), for
// train_step_bench --kernel-trace. Built only where the CUDA toolkit has CUPTI (SPEEDRUN_HAVE_CUPTI).
#pragma once

#include <vector>

#include "trainer/bench/kernel_timeline.h"

namespace gpt {

// One recording at a time per process (CUPTI's activity buffers are process-wide).
class KernelTrace {
 public:
  KernelTrace();
  ~KernelTrace();
  KernelTrace(const KernelTrace&) = delete;
  KernelTrace& operator=(const KernelTrace&) = delete;

  // Synchronises the device, then records every activity launched until stop().
  void start();
  // Synchronises the device, flushes CUPTI's buffers and returns what ran since start(), in completion order.
  std::vector<ActivityInterval> stop();
  // Records CUPTI could not store (its buffers were full); a non-zero count makes the summary incomplete.
  size_t dropped() const;

 private:
  bool recording_ = false;
};

}  // namespace gpt
