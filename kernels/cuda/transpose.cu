// CUDA kernels of kernels/transpose.h: 32×32 shared-memory tiles (padded against bank conflicts), coalesced reads
// of src rows and writes of dst rows.
#include "kernels/cuda/device_utils.cuh"
#include "kernels/transpose.h"

namespace gpt::cuda {

namespace {

constexpr int kTile = 32, kRowsPerPass = 8;

// dst[c, r] = src[r, c] (kAdd: dst[c, r] += src[r, c], in A, rounded once). src: [rows, cols].
template <typename T, typename A, bool kAdd>
__global__ void transpose_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t rows, int64_t cols) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t r0 = blockIdx.y * int64_t{kTile}, c0 = blockIdx.x * int64_t{kTile};
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = src[r * cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;  // dst row c, column r
    if (r < rows && c < cols) {
      T* out = dst + c * rows + r;
      if constexpr (kAdd) {
        *out = from_acc<T>(to_acc<A>(*out) + to_acc<A>(tile[threadIdx.x][i]));
      } else {
        *out = tile[threadIdx.x][i];
      }
    }
  }
}

template <bool kAdd>
void launch(const Tensor& src, Tensor& dst, const char* op) {
  const int64_t rows = src.size(0), cols = src.size(1);
  if (rows == 0 || cols == 0) return;
  GPT_CHECK((rows + kTile - 1) / kTile < 65536, op, ": ", rows, " rows exceed the CUDA tile grid");
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  dispatch_floating_cuda(src.dtype(), op, [&]<typename T, typename A>() {
    transpose_kernel<T, A, kAdd>
        <<<grid, dim3(kTile, kRowsPerPass)>>>(device_ptr<T>(src), device_ptr<T>(dst), rows, cols);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void transpose(const Tensor& src, Tensor& dst) { launch<false>(src, dst, "transpose"); }
void add_transposed(const Tensor& src, Tensor& dst) { launch<true>(src, dst, "add_transposed"); }

}  // namespace gpt::cuda
