// CUDA runtime RAII (streams, events, pinned buffers) and the arena on the device.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "kernels/arena.h"
#include "kernels/cuda/runtime.h"
#include "tests/gpu/gpu_test_util.h"

namespace gpt {
namespace {

TEST(CudaRuntime, PinnedAsyncRoundTripOnAStream) {
  GPT_REQUIRE_CUDA();
  cuda::Stream stream;
  cuda::PinnedBuffer up(4096), down(4096);
  auto values = up.as<float>();
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f + 1.0f;
  Tensor dev = Tensor::empty({512}, DType::f32, Device::cuda);
  cuda::copy_to_device_async(dev, up, 2048, stream.get());  // second half of the buffer
  cuda::copy_to_host_async(down, 0, dev, stream.get());
  cuda::Event done;
  done.record(stream.get());
  done.synchronize();
  EXPECT_TRUE(done.done());
  EXPECT_EQ(std::memcmp(down.data(), static_cast<const char*>(up.data()) + 2048, 2048), 0);
  EXPECT_THROW(cuda::copy_to_device_async(dev, up, 2049, stream.get()), Error);  // overruns the buffer
}

TEST(CudaRuntime, EventsTimeAndOrderStreams) {
  GPT_REQUIRE_CUDA();
  cuda::Stream producer, consumer;
  cuda::Event start(true), stop(true), ready;
  Tensor buf = Tensor::empty({1 << 20}, DType::f32, Device::cuda);
  start.record(producer.get());
  GPT_CUDA_CHECK(cudaMemsetAsync(buf.raw(), 0, buf.nbytes(), producer.get()));
  stop.record(producer.get());
  ready.record(producer.get());
  cuda::stream_wait(consumer.get(), ready);
  consumer.synchronize();
  EXPECT_TRUE(stop.done());  // the consumer waited for the producer's work
  EXPECT_GE(cuda::Event::elapsed_ms(start, stop), 0.0f);
}

TEST(CudaRuntime, StreamGuardSetsAndRestoresTheCurrentStream) {
  GPT_REQUIRE_CUDA();
  cuda::Stream a, b;
  EXPECT_EQ(cuda::current_stream(), nullptr);
  {
    const cuda::StreamGuard ga(a.get());
    EXPECT_EQ(cuda::current_stream(), a.get());
    {
      const cuda::StreamGuard gb(b.get());
      EXPECT_EQ(cuda::current_stream(), b.get());
    }
    EXPECT_EQ(cuda::current_stream(), a.get());
  }
  EXPECT_EQ(cuda::current_stream(), nullptr);
  cuda::Stream moved = std::move(a);
  EXPECT_NE(moved.get(), nullptr);
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from streams are empty
}

TEST(CudaArena, CarvesAlignedDeviceTensorsThatHoldData) {
  GPT_REQUIRE_CUDA();
  ArenaPlan plan;
  plan.add({3, 77}, DType::bf16);
  plan.add({1000}, DType::f32);
  Arena arena(Device::cuda, plan.bytes());
  Tensor a = arena.allocate({3, 77}, DType::bf16);
  Tensor b = arena.allocate({1000}, DType::f32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.raw()) % Arena::kAlignment, 0u);
  const Tensor ha = testing::random_tensor({3, 77}, DType::bf16, 1), hb = testing::random_tensor({1000}, DType::f32, 2);
  a.copy_from(ha);
  b.copy_from(hb);
  EXPECT_EQ(a.to_doubles(), ha.to_doubles());
  EXPECT_EQ(b.to_doubles(), hb.to_doubles());
  EXPECT_THROW(arena.allocate({1}, DType::u8), Error);
}

}  // namespace
}  // namespace gpt
