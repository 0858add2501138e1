#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace gpt {
namespace {

TEST(CudaMemoryPool, FreedBlockIsReusedForTheSameSize) {
  ASSERT_TRUE(cuda_available()) << "no CUDA device visible";
  const void* first = nullptr;
  {
    Tensor t = Tensor::empty({1000, 1000}, DType::f32, Device::cuda);
    first = t.raw();
  }
  const MemoryStats before = memory_stats(Device::cuda);
  Tensor again = Tensor::empty({1000, 1000}, DType::f32, Device::cuda);
  EXPECT_EQ(again.raw(), first);
  EXPECT_EQ(memory_stats(Device::cuda).reserved, before.reserved) << "reuse must not reach the driver";
}

TEST(CudaMemoryPool, StatsTrackAllocatedAndPeak) {
  ASSERT_TRUE(cuda_available());
  reset_peak_memory_stats(Device::cuda);
  const MemoryStats base = memory_stats(Device::cuda);
  {
    Tensor a = Tensor::empty({3 << 20}, DType::f32, Device::cuda);  // 12 MiB
    const MemoryStats during = memory_stats(Device::cuda);
    EXPECT_GE(during.allocated, base.allocated + (12u << 20));
    EXPECT_GE(during.reserved, during.allocated);
  }
  const MemoryStats after = memory_stats(Device::cuda);
  EXPECT_EQ(after.allocated, base.allocated);
  EXPECT_GE(after.peak_allocated, base.allocated + (12u << 20));
}

TEST(CudaMemoryPool, ZeroedTensorReadsZeroAfterReuse) {
  ASSERT_TRUE(cuda_available());
  { Tensor dirty = Tensor::from_floats(std::vector<float>(4096, 7.0f), {4096}, DType::f32, Device::cuda); }
  Tensor z = Tensor::zeros({4096}, DType::f32, Device::cuda);
  for (double v : z.to_doubles()) ASSERT_EQ(v, 0.0);
}

// An allocation the device cannot hold is an error that says how much was asked for and what holds the memory, not
// a bare "out of memory"; the pool goes on serving afterwards.
TEST(CudaMemoryPool, OutOfMemoryNamesTheRequestAndWhatHoldsTheMemory) {
  ASSERT_TRUE(cuda_available());
  const int64_t elements = int64_t{1} << 47;  // 512 TiB of f32: more than any GPU has
  try {
    Tensor huge = Tensor::empty({elements}, DType::f32, Device::cuda);
    FAIL() << "allocated 512 TiB";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUDA out of memory: could not allocate 536870912 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("live tensors hold"), std::string::npos) << what;
    EXPECT_NE(what.find(" free of "), std::string::npos) << what;
  }
  Tensor small = Tensor::zeros({16}, DType::f32, Device::cuda);
  EXPECT_EQ(small.to_doubles(), std::vector<double>(16, 0.0));
}

}  // namespace
}  // namespace gpt
