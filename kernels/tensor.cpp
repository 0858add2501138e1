#include "kernels/tensor.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace gpt {

#ifdef SPEEDRUN_HAVE_CUDA
namespace cuda {
void* malloc_device(size_t bytes);
void free_device(void* ptr, size_t bytes) noexcept;
MemoryStats memory_stats();
void reset_peak_memory_stats();
void copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes);
void memset_zero(void* ptr, size_t bytes);
bool available();
}  // namespace cuda
#endif

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::bf16:
    case DType::u16:
      return 2;
    case DType::u8:
    case DType::e4m3:
    case DType::e5m2:
      return 1;
  }
  GPT_FAIL("unknown dtype");
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return "f64";
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::u16:
      return "u16";
    case DType::u8:
      return "u8";
    case DType::e4m3:
      return "e4m3";
    case DType::e5m2:
      return "e5m2";
  }
  return "?";
}

const char* device_name(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

bool is_floating(DType dtype) { return dtype == DType::f64 || dtype == DType::f32 || dtype == DType::bf16; }

std::string shape_string(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// ---- raw memory ------------------------------------------------------------------------------------

namespace {
// Host allocations are not cached; allocated == reserved.
struct HostCounters {
  std::atomic<size_t> allocated{0}, peak{0};
  void add(size_t n) {
    const size_t now = allocated.fetch_add(n) + n;
    size_t peak_seen = peak.load();
    while (now > peak_seen && !peak.compare_exchange_weak(peak_seen, now)) {
    }
  }
};
HostCounters& host_counters() {
  static HostCounters counters;
  return counters;
}
}  // namespace

MemoryStats memory_stats(Device device) {
  if (device == Device::cpu) {
    const size_t a = host_counters().allocated.load(), p = host_counters().peak.load();
    return {a, a, p, p};
  }
#ifdef SPEEDRUN_HAVE_CUDA
  return cuda::memory_stats();
#else
  return {};
#endif
}

void reset_peak_memory_stats(Device device) {
  if (device == Device::cpu) {
    host_counters().peak.store(host_counters().allocated.load());
    return;
  }
#ifdef SPEEDRUN_HAVE_CUDA
  cuda::reset_peak_memory_stats();
#endif
}

void* device_alloc(Device device, size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (device == Device::cpu) {
    // 64-byte alignment for vector loads; aligned_alloc needs a size multiple of the alignment.
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    GPT_CHECK(p != nullptr, "host allocation of ", bytes, " bytes failed");
    host_counters().add(bytes);
    return p;
  }
#ifdef SPEEDRUN_HAVE_CUDA
  return cuda::malloc_device(bytes);
#else
  GPT_FAIL("CUDA tensor requested but this build has no CUDA backend (nvcc was not found at configure time)");
#endif
}

void device_free(Device device, void* ptr, size_t bytes) noexcept {
  if (ptr == nullptr) return;
  if (bytes == 0) bytes = 1;
  if (device == Device::cpu) {
    std::free(ptr);
    host_counters().allocated.fetch_sub(bytes);
    return;
  }
#ifdef SPEEDRUN_HAVE_CUDA
  cuda::free_device(ptr, bytes);
#endif
}

void device_copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::cpu && src_device == Device::cpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef SPEEDRUN_HAVE_CUDA
  cuda::copy(dst, dst_device == Device::cuda, src, src_device == Device::cuda, bytes);
#else
  GPT_FAIL("copy involving a CUDA tensor in a build without CUDA");
#endif
}

void device_memset_zero(void* ptr, Device device, size_t bytes) {
  if (device == Device::cpu) {
    std::memset(ptr, 0, bytes);
    return;
  }
#ifdef SPEEDRUN_HAVE_CUDA
  cuda::memset_zero(ptr, bytes);
#else
  GPT_FAIL("memset of a CUDA tensor in a build without CUDA");
#endif
}

bool cuda_available() {
#ifdef SPEEDRUN_HAVE_CUDA
  return cuda::available();
#else
  return false;
#endif
}

Storage::Storage(Device device, size_t bytes) : device_(device), bytes_(bytes), data_(device_alloc(device, bytes)) {}
Storage::~Storage() { device_free(device_, data_, bytes_); }

// ---- Tensor ------------------------------------------------------------------------------------------

namespace {
// SPEEDRUN_POISON_ALLOC=1 fills every new tensor with 0xFF bytes (NaN for floating types), so code that reads an
// `empty` tensor before writing it fails loudly instead of happening to see zeros from a fresh page.
bool poison_allocations() {
  static const bool enabled = [] {
    const char* v = std::getenv("SPEEDRUN_POISON_ALLOC");
    return v != nullptr && v[0] == '1';
  }();
  return enabled;
}
}  // namespace

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  for (int64_t s : shape) GPT_CHECK(s >= 0, "negative dimension in shape ", shape_string(shape));
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(device, t.nbytes());
  if (poison_allocations() && t.nbytes() > 0) {
    if (device == Device::cpu) {
      std::memset(t.raw(), 0xFF, t.nbytes());
    } else {
      const std::vector<unsigned char> ones(t.nbytes(), 0xFF);
      device_copy(t.raw(), device, ones.data(), Device::cpu, t.nbytes());
    }
  }
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, size_t offset, Shape shape, DType dtype) {
  GPT_CHECK(storage != nullptr, "from_storage: null storage");
  for (int64_t s : shape) GPT_CHECK(s >= 0, "negative dimension in shape ", shape_string(shape));
  GPT_CHECK(offset % dtype_size(dtype) == 0, "from_storage: offset ", offset, " is not a multiple of ",
            dtype_name(dtype), "'s size");
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  GPT_CHECK(offset + bytes <= storage->bytes(), "from_storage: ", dtype_name(dtype), shape_string(shape), " at offset ",
            offset, " overruns a storage of ", storage->bytes(), " bytes");
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = storage->device();
  t.offset_ = offset;
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  Tensor t = empty(std::move(shape), dtype, device);
  t.zero_();
  return t;
}

namespace {
template <typename Src>
Tensor from_host_values(std::span<const Src> values, Shape shape, DType dtype, Device device) {
  GPT_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "from_floats: ", values.size(),
            " values for shape ", shape_string(shape));
  Tensor host = Tensor::empty(shape, dtype, Device::cpu);
  const size_t n = values.size();
  switch (dtype) {
    case DType::f64:
      for (size_t i = 0; i < n; ++i) host.data<double>()[i] = static_cast<double>(values[i]);
      break;
    case DType::f32:
      for (size_t i = 0; i < n; ++i) host.data<float>()[i] = static_cast<float>(values[i]);
      break;
    case DType::bf16:
      for (size_t i = 0; i < n; ++i) host.data<bf16>()[i] = bf16(static_cast<float>(values[i]));
      break;
    default:
      GPT_FAIL("from_floats: dtype ", dtype_name(dtype), " is not floating");
  }
  return host.to(device);
}
}  // namespace

Tensor Tensor::from_floats(std::span<const float> values, Shape shape, DType dtype, Device device) {
  return from_host_values(values, std::move(shape), dtype, device);
}
Tensor Tensor::from_doubles(std::span<const double> values, Shape shape, DType dtype, Device device) {
  return from_host_values(values, std::move(shape), dtype, device);
}

int64_t Tensor::size(int dim) const {
  const int n = ndim();
  if (dim < 0) dim += n;
  GPT_CHECK(dim >= 0 && dim < n, "dimension ", dim, " out of range for ", describe());
  return shape_[static_cast<size_t>(dim)];
}

void* Tensor::raw() {
  GPT_CHECK(defined(), "access to an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_;
}
const void* Tensor::raw() const {
  GPT_CHECK(defined(), "access to an undefined tensor");
  return static_cast<const char*>(storage_->data()) + offset_;
}

void Tensor::check_type(DType expected) const {
  GPT_CHECK(dtype_ == expected, "tensor ", describe(), " accessed as ", dtype_name(expected));
}

Tensor Tensor::view(Shape shape) const {
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      GPT_CHECK(infer < 0, "view: more than one -1 in ", shape_string(shape));
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    GPT_CHECK(known > 0 && numel() % known == 0, "view: cannot infer ", shape_string(shape), " from ", describe());
    shape[static_cast<size_t>(infer)] = numel() / known;
  }
  GPT_CHECK(shape_numel(shape) == numel(), "view: ", shape_string(shape), " does not match ", describe());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  GPT_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "slice [", begin, ", ", end,
            ") out of range for ", describe());
  Tensor t = *this;
  const int64_t row = numel() / std::max<int64_t>(shape_[0], 1);
  t.offset_ += static_cast<size_t>(begin * row) * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::operator[](int64_t i) const {
  Tensor t = slice(i, i + 1);
  t.shape_.erase(t.shape_.begin());
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor t = empty(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  GPT_CHECK(is_floating(dtype) && is_floating(dtype_), "to(", dtype_name(dtype), "): only floating conversions, got ",
            describe());
  const std::vector<double> values = to_doubles();
  return from_doubles(values, shape_, dtype, device_);
}

void Tensor::copy_from(const Tensor& src) {
  GPT_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_, "copy_from: ", src.describe(), " into ", describe());
  device_copy(raw(), device_, src.raw(), src.device_, nbytes());
}

void Tensor::zero_() { device_memset_zero(raw(), device_, nbytes()); }

std::vector<double> Tensor::to_doubles() const {
  const Tensor host = to(Device::cpu);
  const size_t n = static_cast<size_t>(numel());
  std::vector<double> out(n);
  switch (dtype_) {
    case DType::f64:
      for (size_t i = 0; i < n; ++i) out[i] = host.data<double>()[i];
      break;
    case DType::f32:
      for (size_t i = 0; i < n; ++i) out[i] = host.data<float>()[i];
      break;
    case DType::bf16:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(host.data<bf16>()[i]);
      break;
    case DType::i32:
      for (size_t i = 0; i < n; ++i) out[i] = host.data<int32_t>()[i];
      break;
    case DType::i64:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(host.data<int64_t>()[i]);
      break;
    default:
      GPT_FAIL("to_doubles: unsupported dtype ", dtype_name(dtype_));
  }
  return out;
}

std::vector<float> Tensor::to_floats() const {
  const std::vector<double> d = to_doubles();
  return {d.begin(), d.end()};
}

std::string Tensor::describe() const {
  if (!defined()) return "<undefined tensor>";
  return std::string(dtype_name(dtype_)) + shape_string(shape_) + " " + device_name(device_);
}

void check_shape(const Tensor& t, const Shape& expected, const char* what) {
  GPT_CHECK(t.defined() && t.shape() == expected, what, ": expected shape ", shape_string(expected), ", got ",
            t.describe());
}

void check_dtype(const Tensor& t, DType expected, const char* what) {
  GPT_CHECK(t.defined() && t.dtype() == expected, what, ": expected dtype ", dtype_name(expected), ", got ",
            t.describe());
}

void check_same_device(std::initializer_list<const Tensor*> tensors, const char* op) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (first == nullptr) first = t;
    GPT_CHECK(t->device() == first->device(), op, ": tensors on different devices (", first->describe(), " and ",
              t->describe(), ")");
  }
}

}  // namespace gpt
