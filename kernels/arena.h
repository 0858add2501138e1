#pragma once
// One pre-planned allocation carved into many tensors (activations, parameter banks, optimizer state): a single
// cudaMalloc for a whole run instead of thousands, no allocator work in the step, and addresses that stay fixed
// (CUDA graphs can capture kernels that use them).
//
// Usage: plan first (ArenaPlan adds up aligned footprints), allocate once, then carve in any order:
//   ArenaPlan plan;  plan.add({T, 768}, DType::bf16);  plan.add({T}, DType::f32);
//   Arena arena(Device::cuda, plan.bytes());
//   Tensor x = arena.allocate({T, 768}, DType::bf16);
// Carved tensors share the arena's storage and keep it alive; the arena never reuses bytes (no free), so a
// tensor stays valid for as long as anyone holds it.
#include <cstddef>
#include <memory>

#include "kernels/tensor.h"

namespace gpt {

class ArenaPlan {
 public:
  // Adds one tensor and returns its offset in a plan-ordered arena.
  size_t add(const Shape& shape, DType dtype);
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_ = 0;
};

class Arena {
 public:
  // 256 bytes: the alignment cudaMalloc gives, enough for 16-byte vector access, TMA and cuBLASLt's best kernels.
  static constexpr size_t kAlignment = 256;
  static size_t footprint(const Shape& shape, DType dtype);  // bytes rounded up to kAlignment

  Arena(Device device, size_t capacity_bytes);

  // The next free, aligned block as a tensor; throws naming the request when the arena is full.
  Tensor allocate(const Shape& shape, DType dtype);

  Device device() const { return storage_->device(); }
  size_t capacity() const { return storage_->bytes(); }
  size_t used() const { return used_; }
  size_t remaining() const { return capacity() - used_; }

 private:
  std::shared_ptr<Storage> storage_;
  size_t used_ = 0;
};

}  // namespace gpt
