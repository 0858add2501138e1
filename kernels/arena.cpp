#include "kernels/arena.h"

#include <cstdint>

namespace gpt {

size_t Arena::footprint(const Shape& shape, DType dtype) {
  for (int64_t s : shape) GPT_CHECK(s >= 0, "arena: negative dimension in shape ", shape_string(shape));
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

size_t ArenaPlan::add(const Shape& shape, DType dtype) {
  const size_t offset = bytes_;
  bytes_ += Arena::footprint(shape, dtype);
  return offset;
}

Arena::Arena(Device device, size_t capacity_bytes) : storage_(std::make_shared<Storage>(device, capacity_bytes)) {
  // cudaMalloc gives 256-byte alignment; host storage 64 (kernels/tensor.cpp), which CPU kernels need at most.
  const size_t base_alignment = device == Device::cuda ? kAlignment : 64;
  GPT_CHECK(reinterpret_cast<uintptr_t>(storage_->data()) % base_alignment == 0, "arena: the ", device_name(device),
            " allocation of ", capacity_bytes, " bytes is not ", base_alignment, "-byte aligned");
}

Tensor Arena::allocate(const Shape& shape, DType dtype) {
  const size_t need = footprint(shape, dtype);
  GPT_CHECK(need <= remaining(), "arena: ", dtype_name(dtype), shape_string(shape), " needs ", need, " bytes, only ",
            remaining(), " of ", capacity(), " are left (plan the arena with ArenaPlan)");
  Tensor t = Tensor::from_storage(storage_, used_, shape, dtype);
  used_ += need;
  return t;
}

}  // namespace gpt
