#include <gtest/gtest.h>

#include "kernels/tensor.h"

namespace gpt {
namespace {

TEST(HostMemoryStats, AllocatedRisesAndFallsWithTensors) {
  const MemoryStats base = memory_stats(Device::cpu);
  {
    Tensor t = Tensor::empty({1 << 20}, DType::f32);
    EXPECT_EQ(memory_stats(Device::cpu).allocated, base.allocated + (4u << 20));
  }
  EXPECT_EQ(memory_stats(Device::cpu).allocated, base.allocated);
}

TEST(HostMemoryStats, PeakSurvivesFreeUntilReset) {
  reset_peak_memory_stats(Device::cpu);
  const size_t base = memory_stats(Device::cpu).allocated;
  { Tensor t = Tensor::empty({1 << 20}, DType::f64); }
  EXPECT_GE(memory_stats(Device::cpu).peak_allocated, base + (8u << 20));
  reset_peak_memory_stats(Device::cpu);
  EXPECT_EQ(memory_stats(Device::cpu).peak_allocated, memory_stats(Device::cpu).allocated);
}

}  // namespace
}  // namespace gpt
