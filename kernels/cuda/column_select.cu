// CUDA kernels of kernels/column_select.h (RECIPE §S.4). Both are copies or single adds per element, so they give the
// CPU reference's bits. The scatter-add runs one thread per (row, j) when the columns are strictly increasing (the
// sampled softmax's sorted candidate set: no two j share a column, no order to keep); otherwise (repeated or unsorted
// columns) one thread per row walks j in order, which is the CPU's order and therefore its rounding, slowly. The
// choice is made on the device (a flag the check kernel writes), so the host never waits. Columns outside [0, V)
// (bad input, an error on the CPU path) gather NaN and are skipped by the scatter-add.
#include "kernels/column_select.h"
#include "kernels/cuda/device_utils.cuh"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxRowBlocks = 65535;

// out[r, j] = table[r, columns[j]]: blocks (x: j, y: rows strided).
template <typename T, typename A>
__global__ void gather_kernel(const T* __restrict__ table, const int64_t* __restrict__ columns, T* __restrict__ out,
                              int64_t rows, int64_t vocab, int64_t width) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= width) return;
  const int64_t c = columns[j];
  const bool valid = c >= 0 && c < vocab;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    out[r * width + j] = valid ? table[r * vocab + c] : from_acc<T>(A(NAN));
  }
}

// *distinct_sorted = 1 when columns are strictly increasing, else 0 (one block).
__global__ void strictly_increasing_kernel(const int64_t* __restrict__ columns, int64_t width,
                                           int* __restrict__ distinct_sorted) {
  int descent = 0;
  for (int64_t j = 1 + threadIdx.x; j < width; j += blockDim.x) descent |= columns[j] <= columns[j - 1];
  descent = __syncthreads_or(descent);
  if (threadIdx.x == 0) *distinct_sorted = descent ? 0 : 1;
}

// table[r, columns[j]] += src[r, j], rounded once per add. Strictly increasing columns: thread (r, j) adds its own
// element. Otherwise: thread 0 of block (0, r) adds the row's elements in order of j (the CPU's order).
template <typename T, typename A>
__global__ void scatter_add_kernel(const T* __restrict__ src, const int64_t* __restrict__ columns,
                                   T* __restrict__ table, int64_t rows, int64_t vocab, int64_t width,
                                   const int* __restrict__ distinct_sorted) {
  if (*distinct_sorted != 0) {
    const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= width) return;
    const int64_t c = columns[j];
    if (c < 0 || c >= vocab) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
      T& dst = table[r * vocab + c];
      dst = from_acc<T>(add_rn(to_acc<A>(dst), to_acc<A>(src[r * width + j])));
    }
    return;
  }
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (int64_t j = 0; j < width; ++j) {
      const int64_t c = columns[j];
      if (c < 0 || c >= vocab) continue;
      T& dst = table[r * vocab + c];
      dst = from_acc<T>(add_rn(to_acc<A>(dst), to_acc<A>(src[r * width + j])));
    }
  }
}

dim3 grid_for(int64_t rows, int64_t width) {
  return dim3(static_cast<unsigned>((width + kThreads - 1) / kThreads),
              static_cast<unsigned>(std::min<int64_t>(rows, kMaxRowBlocks)));
}

}  // namespace

void column_gather(const Tensor& table, const Tensor& columns, Tensor& out) {
  const int64_t rows = table.size(0), vocab = table.size(1), width = columns.size(0);
  if (rows == 0 || width == 0) return;
  dispatch_floating_cuda(table.dtype(), "column_gather", [&]<typename T, typename A>() {
    gather_kernel<T, A><<<grid_for(rows, width), kThreads, 0, op_stream()>>>(
        device_ptr<T>(table), device_ptr<int64_t>(columns), device_ptr<T>(out), rows, vocab, width);
    GPT_CUDA_CHECK_LAUNCH();
  });
}

void column_scatter_add(const Tensor& src, const Tensor& columns, Tensor& table) {
  const int64_t rows = table.size(0), vocab = table.size(1), width = columns.size(0);
  if (rows == 0 || width == 0) return;
  DeviceScratch flag(sizeof(int));
  strictly_increasing_kernel<<<1, 1024, 0, op_stream()>>>(device_ptr<int64_t>(columns), width, flag.as<int>());
  GPT_CUDA_CHECK_LAUNCH();
  dispatch_floating_cuda(table.dtype(), "column_scatter_add", [&]<typename T, typename A>() {
    scatter_add_kernel<T, A><<<grid_for(rows, width), kThreads, 0, op_stream()>>>(
        device_ptr<T>(src), device_ptr<int64_t>(columns), device_ptr<T>(table), rows, vocab, width, flag.as<int>());
    GPT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpt::cuda
