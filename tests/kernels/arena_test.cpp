#include <gtest/gtest.h>

#include "kernels/arena.h"

namespace gpt {
namespace {

TEST(Arena, FootprintRoundsUpToAlignment) {
  EXPECT_EQ(Arena::footprint({1}, DType::u8), 256u);
  EXPECT_EQ(Arena::footprint({64}, DType::f32), 256u);
  EXPECT_EQ(Arena::footprint({65}, DType::f32), 512u);
  EXPECT_EQ(Arena::footprint({0, 5}, DType::bf16), 0u);
}

TEST(Arena, PlanOffsetsMatchAllocationOrder) {
  ArenaPlan plan;
  EXPECT_EQ(plan.add({3, 5}, DType::f32), 0u);
  EXPECT_EQ(plan.add({100}, DType::bf16), 256u);
  EXPECT_EQ(plan.add({1}, DType::f64), 512u);
  EXPECT_EQ(plan.bytes(), 768u);
  Arena arena(Device::cpu, plan.bytes());
  const Tensor a = arena.allocate({3, 5}, DType::f32);
  const Tensor b = arena.allocate({100}, DType::bf16);
  const Tensor c = arena.allocate({1}, DType::f64);
  const auto* base = static_cast<const char*>(a.raw());
  EXPECT_EQ(static_cast<const char*>(b.raw()) - base, 256);
  EXPECT_EQ(static_cast<const char*>(c.raw()) - base, 512);
  EXPECT_EQ(arena.used(), plan.bytes());
  EXPECT_EQ(arena.remaining(), 0u);
}

TEST(Arena, CarvedTensorsAreDisjointAndUsable) {
  Arena arena(Device::cpu, 4096);
  Tensor a = arena.allocate({16}, DType::f32);
  Tensor b = arena.allocate({16}, DType::f32);
  for (int i = 0; i < 16; ++i) {
    a.data<float>()[i] = 1.0f;
    b.data<float>()[i] = 2.0f;
  }
  for (int i = 0; i < 16; ++i) EXPECT_EQ(a.data<float>()[i], 1.0f);
  EXPECT_EQ(a.describe(), "f32[16] cpu");
}

TEST(Arena, TensorsOutliveTheArenaObject) {
  Tensor t;
  {
    Arena arena(Device::cpu, 1024);
    t = arena.allocate({4}, DType::f64);
  }
  t.data<double>()[3] = 7.0;  // the storage is still alive (ASan would catch a use after free)
  EXPECT_EQ(t.data<double>()[3], 7.0);
}

TEST(Arena, FullArenaThrowsNamingTheRequest) {
  Arena arena(Device::cpu, 512);
  arena.allocate({64}, DType::f32);
  try {
    arena.allocate({200}, DType::bf16);
    FAIL() << "expected gpt::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16[200]"), std::string::npos) << e.what();
  }
}

TEST(TensorFromStorage, RejectsOverrunAndMisalignedOffset) {
  auto storage = std::make_shared<Storage>(Device::cpu, 64);
  EXPECT_NO_THROW(Tensor::from_storage(storage, 32, {8}, DType::f32));
  EXPECT_THROW(Tensor::from_storage(storage, 36, {8}, DType::f32), Error);
  EXPECT_THROW(Tensor::from_storage(storage, 2, {1}, DType::f32), Error);
  EXPECT_THROW(Tensor::from_storage(nullptr, 0, {1}, DType::f32), Error);
}

}  // namespace
}  // namespace gpt
