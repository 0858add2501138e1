// Stable sort of token indices by row id (cub radix sort), see row_sort.cuh.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/row_sort.cuh"

namespace gpt::cuda {

namespace {

__global__ void iota_kernel(int32_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = static_cast<int32_t>(i);
  }
}

}  // namespace

TokensByRow sort_tokens_by_row(const int32_t* ids, int64_t n, int64_t rows) {
  GPT_CHECK(n < (int64_t{1} << 31), "sort_tokens_by_row: ", n, " tokens exceed the int32 index range");
  const int items = static_cast<int>(n);
  // All 32 key bits: ids outside [0, rows) (bad input) still sort into runs of equal values, so two runs never
  // share one row; the kernels skip such runs.
  (void)rows;
  const int end_bit = 32;
  size_t temp_bytes = 0;
  GPT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, ids, static_cast<int32_t*>(nullptr),
                                                 static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                                 items, 0, end_bit));
  const size_t index_bytes = (static_cast<size_t>(n) * sizeof(int32_t) + 255) / 256 * 256;
  TokensByRow out{DeviceScratch(3 * index_bytes + temp_bytes, kLegacyDefaultStream), nullptr, nullptr};
  auto* base = out.storage.as<unsigned char>();
  auto* sorted = reinterpret_cast<int32_t*>(base);
  auto* order = reinterpret_cast<int32_t*>(base + index_bytes);
  auto* iota = reinterpret_cast<int32_t*>(base + 2 * index_bytes);
  void* temp = base + 3 * index_bytes;
  if (n > 0) {
    iota_kernel<<<blocks_for(n, 256, 4096), 256>>>(iota, n);
    GPT_CUDA_CHECK_LAUNCH();
    GPT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, ids, sorted, iota, order, items, 0, end_bit));
  }
  out.sorted_ids = sorted;
  out.token_order = order;
  return out;
}

}  // namespace gpt::cuda
