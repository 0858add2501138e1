// CUDA kernels of kernels/ngram_update.h (RECIPE §S.2): the cycle gradient's per-slot adds and its rounding to the
// exchange dtype, the sparse Adam of the touched rows and the eager decay. Every arithmetic step is one correctly
// rounded operation (device_utils.cuh), in the CPU reference's order, so each result is the CPU's bit for bit:
// elementwise work is spread over threads freely, and the one order-dependent sum (Σ g² of a row) runs serially in
// one thread, over the row staged in shared memory.
#include <cuda_fp16.h>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/ngram_update.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kAdamThreads = 128;         // one block per touched row
constexpr int kAdamStagedColumns = 1024;  // rows up to this width sum Σ g² from shared memory

template <typename A>
__global__ void cycle_add_kernel(A* __restrict__ cycle, const int32_t* __restrict__ slots, const A* __restrict__ sums,
                                 int64_t n, int64_t d, bool round_fp16) {
  const int64_t total = n * d;
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < total; k += int64_t{gridDim.x} * blockDim.x) {
    const int64_t u = k / d, c = k - u * d;
    A* dst = cycle + static_cast<int64_t>(slots[u]) * d + c;
    A sum = add_rn(*dst, sums[k]);
    if constexpr (std::is_same_v<A, float>) {
      if (round_fp16) sum = __half2float(__float2half_rn(sum));
    }
    *dst = sum;
  }
}

template <typename T, typename A>
__global__ void cycle_gather_kernel(const A* __restrict__ cycle, const int32_t* __restrict__ slots, int64_t n,
                                    int64_t d, T* __restrict__ out) {
  const int64_t total = n * d;
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < total; k += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = k / d, c = k - i * d;
    out[k] = from_acc<T>(cycle[static_cast<int64_t>(slots[i]) * d + c]);
  }
}

template <typename T, typename A>
__global__ void __launch_bounds__(kAdamThreads)
    sparse_adam_kernel(T* __restrict__ table, float* __restrict__ second_moment, int64_t* __restrict__ stamps,
                       const float* __restrict__ history, const int32_t* __restrict__ rows, const T* __restrict__ grad,
                       int64_t n, int d, NgramAdamStep step) {
  __shared__ A staged[kAdamStagedColumns];
  __shared__ A denom_shared;
  const bool stage = d <= kAdamStagedColumns;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const int64_t r = rows[i];
    const T* g = grad + i * d;
    T* p = table + r * d;
    __syncthreads();  // the previous row's reads of staged and denom_shared are done
    if (stage) {
      for (int c = threadIdx.x; c < d; c += blockDim.x) staged[c] = to_acc<A>(g[c]);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      A square_sum = 0;
      for (int c = 0; c < d; ++c) {
        const A gc = stage ? staged[c] : to_acc<A>(g[c]);
        square_sum = add_rn(square_sum, mul_rn(gc, gc));
      }
      const auto mean_square = static_cast<float>(div_rn(square_sum, static_cast<A>(d)));
      float v = second_moment[r];
      for (int64_t k = stamps[r] + 1; k < step.event; ++k) v = mul_rn(history[k - 1], v);
      const float decayed = mul_rn(static_cast<float>(step.beta2), v);
      v = add_rn(decayed, mul_rn(static_cast<float>(1.0 - step.beta2), mean_square));
      second_moment[r] = v;
      stamps[r] = step.event;
      denom_shared = add_rn(sqrt_rn(static_cast<A>(v)), static_cast<A>(step.eps));
    }
    __syncthreads();
    const A denom = denom_shared;
    const auto step_scale = static_cast<A>(step.step_scale), decay_scale = static_cast<A>(step.decay_scale);
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
      const A pc = to_acc<A>(p[c]);
      A u = mul_rn(div_rn(to_acc<A>(g[c]), denom), step_scale);
      if (mul_rn(u, pc) > A(0)) u = add_rn(u, mul_rn(decay_scale, pc));
      p[c] = from_acc<T>(sub_rn(pc, u));
    }
  }
}

__global__ void decay_untouched_kernel(float* __restrict__ second_moment, int64_t* __restrict__ stamps, int64_t rows,
                                       float beta, int64_t event) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows; r += int64_t{gridDim.x} * blockDim.x) {
    if (stamps[r] == event) continue;
    second_moment[r] = mul_rn(beta, second_moment[r]);
    stamps[r] = event;
  }
}

}  // namespace

void ngram_cycle_add(Tensor& cycle, const Tensor& slots, const Tensor& sums, bool round_fp16) {
  const int64_t n = slots.size(0), d = cycle.size(1);
  if (n == 0 || d == 0) return;
  auto launch = [&]<typename A>() {
    cycle_add_kernel<A><<<grid_stride_blocks(n * d, kThreads), kThreads, 0, op_stream()>>>(
        device_ptr<A>(cycle), device_ptr<int32_t>(slots), device_ptr<A>(sums), n, d, round_fp16);
  };
  if (cycle.dtype() == DType::f64) {
    launch.template operator()<double>();
  } else {
    launch.template operator()<float>();
  }
  GPT_CUDA_CHECK_LAUNCH();
}

void ngram_cycle_gather(const Tensor& cycle, const Tensor& slots, Tensor& out) {
  const int64_t n = slots.size(0), d = cycle.size(1);
  if (n == 0 || d == 0) return;
  dispatch_floating_cuda(out.dtype(), "ngram_cycle_gather", [&]<typename T, typename A>() {
    cycle_gather_kernel<T, A><<<grid_stride_blocks(n * d, kThreads), kThreads, 0, op_stream()>>>(
        device_ptr<A>(cycle), device_ptr<int32_t>(slots), n, d, device_ptr<T>(out));
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void ngram_sparse_adam(Tensor& table, Tensor& second_moment, Tensor& stamps, const Tensor& beta2_history,
                       const Tensor& rows, const Tensor& grad, const NgramAdamStep& step) {
  const int64_t n = rows.size(0);
  const int d = static_cast<int>(table.size(1));
  if (n == 0) return;
  dispatch_floating_cuda(table.dtype(), "ngram_sparse_adam", [&]<typename T, typename A>() {
    sparse_adam_kernel<T, A><<<blocks_for(n, 1), kAdamThreads, 0, op_stream()>>>(
        device_ptr<T>(table), device_ptr<float>(second_moment), device_ptr<int64_t>(stamps),
        device_ptr<float>(beta2_history), device_ptr<int32_t>(rows), device_ptr<T>(grad), n, d, step);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void ngram_decay_untouched(Tensor& second_moment, Tensor& stamps, double beta2, int64_t event) {
  const int64_t rows = second_moment.numel();
  if (rows == 0) return;
  decay_untouched_kernel<<<grid_stride_blocks(rows, kThreads), kThreads, 0, op_stream()>>>(
      device_ptr<float>(second_moment), device_ptr<int64_t>(stamps), rows, static_cast<float>(beta2), event);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
