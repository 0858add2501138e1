#pragma once
// The backend's tensor: a contiguous, row-major block of one dtype on one device.
//
// Deliberately small: no strides. Views are reshapes and ranges along the leading dimension, which is
// all the model needs (banks are stacks of matrices, activations are [T, d]). Storage is shared and
// reference-counted, freed by RAII on the device that owns it.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "base/check.h"

namespace gpt {

enum class DType : uint8_t { f64, f32, bf16, i32, i64, u16, u8, e4m3, e5m2 };
enum class Device : uint8_t { cpu, cuda };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
const char* device_name(Device device);
bool is_floating(DType dtype);  // f64, f32, bf16
// Dtype of saved per-row statistics (rstd, lse, ...): f64 in f64 gradient checks, f32 otherwise.
inline DType stat_dtype(DType x) { return x == DType::f64 ? DType::f64 : DType::f32; }

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::u16;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}

using Shape = std::vector<int64_t>;
std::string shape_string(const Shape& shape);
int64_t shape_numel(const Shape& shape);

// Owns one allocation on one device.
class Storage {
 public:
  Storage(Device device, size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Device device_;
  size_t bytes_;
  void* data_ = nullptr;
};

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(Shape shape, DType dtype, Device device = Device::cpu);
  static Tensor zeros(Shape shape, DType dtype, Device device = Device::cpu);
  // Host values converted to `dtype` (rounded for bf16), then placed on `device`.
  static Tensor from_floats(std::span<const float> values, Shape shape, DType dtype, Device device = Device::cpu);
  static Tensor from_doubles(std::span<const double> values, Shape shape, DType dtype, Device device = Device::cpu);
  // A tensor over bytes [offset, offset + nbytes) of an existing storage, which it keeps alive. The one hook for
  // carving many tensors out of one allocation (kernels/arena.h); offset must suit the dtype's alignment.
  static Tensor from_storage(std::shared_ptr<Storage> storage, size_t offset, Shape shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t size(int dim) const;  // negative dims count from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_cpu() const { return device_ == Device::cpu; }

  void* raw();
  const void* raw() const;
  // Typed access; throws if T does not match the dtype.
  template <typename T>
  T* data() {
    check_type(dtype_of<T>());
    return static_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(raw());
  }

  // Same storage, new shape with the same element count (one dim may be -1).
  Tensor view(Shape shape) const;
  // Rows [begin, end) of the leading dimension (shares storage).
  Tensor slice(int64_t begin, int64_t end) const;
  // Row i of the leading dimension, with that dimension dropped.
  Tensor operator[](int64_t i) const;

  Tensor to(Device device) const;  // copy (or this when already there)
  Tensor to(DType dtype) const;    // converting copy on the CPU; floating types only, RNE to bf16
  Tensor clone() const;
  void copy_from(const Tensor& src);  // same shape and dtype, any devices
  void zero_();

  // Host-side readback of a floating tensor, whatever its dtype or device.
  std::vector<double> to_doubles() const;
  std::vector<float> to_floats() const;

  std::string describe() const;  // "bf16[4, 768] cpu"

 private:
  void check_type(DType expected) const;

  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // in bytes
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
};

// Checks used at the top of every op: names the argument and what was expected.
void check_shape(const Tensor& t, const Shape& expected, const char* what);
void check_dtype(const Tensor& t, DType expected, const char* what);
void check_same_device(std::initializer_list<const Tensor*> tensors, const char* op);

// Raw device memory primitives; the CUDA ones live in kernels/cuda/memory.cu.
// CUDA memory comes from a caching pool (kernels/cuda/memory.cu): freed blocks are kept for reuse by later
// allocations of the same rounded size, so a training step allocates nothing from the driver after the first.
void* device_alloc(Device device, size_t bytes);
void device_free(Device device, void* ptr, size_t bytes) noexcept;

// Bytes held by live tensors (allocated) and by the allocator including its cache (reserved), with peaks since
// the last reset: the trainer's `peak memory allocated: … reserved: …` line.
struct MemoryStats {
  size_t allocated = 0, reserved = 0, peak_allocated = 0, peak_reserved = 0;
};
MemoryStats memory_stats(Device device);
void reset_peak_memory_stats(Device device);
void device_copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
void device_memset_zero(void* ptr, Device device, size_t bytes);
bool cuda_available();  // built with CUDA and at least one device visible

}  // namespace gpt
