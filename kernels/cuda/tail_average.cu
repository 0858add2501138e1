// CUDA kernels of kernels/tail_average.h (RECIPE §S.5). The three elementwise ops repeat the CPU reference's rounding
// sequence (no FMA contraction) and give its bits. sum_of_squares sums in double in a fixed order that depends on
// the element count only (fixed chunks, a fixed tree in each, chunk totals in chunk order): reproducible run to run
// and on any GPU, equal to the CPU's serial sum up to the rounding of the order (relative ≲ 1e-15 for a sum of
// non-negative terms of 10^8 elements, far below what the norm restoration of §S.5 can see).
#include <climits>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/tail_average.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPack = 4;
// Elements per chunk of sum_of_squares: each thread adds kThreads-strided elements of one chunk serially.
constexpr int64_t kSquareChunk = 64 * kThreads;

// The elementwise steps of the three elementwise ops: the kind picks the formula, `scalar` is rate or factor.
enum class Elementwise { accumulate, seed_copy, ship, replace, scale };

template <Elementwise kKind, typename T, typename A>
__device__ __forceinline__ void elementwise_step(T& w, A& acc, A scalar) {
  if constexpr (kKind == Elementwise::seed_copy) {
    acc = to_acc<A>(w);  // acc ← w
  } else if constexpr (kKind == Elementwise::accumulate) {
    acc = add_rn(acc, mul_rn(scalar, sub_rn(to_acc<A>(w), acc)));  // acc ← acc + rate·(w − acc)
  } else if constexpr (kKind == Elementwise::replace) {
    w = from_acc<T>(acc);  // w ← acc, rounded once
  } else if constexpr (kKind == Elementwise::ship) {
    const A x = to_acc<A>(w);  // w ← w + factor·(acc − w), rounded once
    w = from_acc<T>(add_rn(x, mul_rn(scalar, sub_rn(acc, x))));
  } else {
    w = from_acc<T>(mul_rn(to_acc<A>(w), scalar));  // w ← w·factor
  }
}

// N consecutive elements per step (16-byte loads of the accumulator when N = kPack); each kind reads and writes
// only the tensors its formula needs.
template <typename T, typename A, Elementwise kKind, int N>
__global__ void elementwise_kernel(T* __restrict__ w, A* __restrict__ acc, int64_t packs, A scalar) {
  constexpr bool kReadsW = kKind != Elementwise::replace;
  constexpr bool kWritesW = kKind == Elementwise::replace || kKind == Elementwise::ship || kKind == Elementwise::scale;
  constexpr bool kReadsAcc =
      kKind == Elementwise::accumulate || kKind == Elementwise::replace || kKind == Elementwise::ship;
  constexpr bool kWritesAcc = kKind == Elementwise::accumulate || kKind == Elementwise::seed_copy;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    Pack<T, N> wp{};
    Pack<A, N> ap{};
    if constexpr (kReadsW) wp = load_pack<T, N>(w + i * N);
    if constexpr (kReadsAcc) ap = load_pack<A, N>(acc + i * N);
#pragma unroll
    for (int j = 0; j < N; ++j) elementwise_step<kKind>(wp.v[j], ap.v[j], scalar);
    if constexpr (kWritesW) store_pack<T, N>(w + i * N, wp);
    if constexpr (kWritesAcc) store_pack<A, N>(acc + i * N, ap);
  }
}

template <Elementwise kKind, typename T, typename A, int N>
void launch_packs(T* w, A* acc, int64_t packs, A scalar) {
  if (packs == 0) return;
  elementwise_kernel<T, A, kKind, N>
      <<<grid_stride_blocks(packs, kThreads), kThreads, 0, op_stream()>>>(w, acc, packs, scalar);
  GPT_CUDA_CHECK_LAUNCH();
}

// Packs of kPack over the aligned head, single elements over the rest (acc is null for scale).
template <Elementwise kKind, typename T, typename A>
void launch_elementwise(T* w, A* acc, int64_t n, A scalar) {
  const bool packed = aligned_to(w, sizeof(T) * kPack) && (acc == nullptr || aligned_to(acc, sizeof(A) * kPack));
  const int64_t head = packed ? n / kPack * kPack : 0;
  launch_packs<kKind, T, A, kPack>(w, acc, head / kPack, scalar);
  launch_packs<kKind, T, A, 1>(w + head, acc == nullptr ? nullptr : acc + head, n - head, scalar);
}

// partial[c] = Σ w[i]² over chunk c in double: thread j adds elements j, j + kThreads, ... of the chunk in order,
// then block_sum (fixed tree).
template <typename T, typename A>
__global__ void square_sum_chunks_kernel(const T* __restrict__ w, int64_t n, double* __restrict__ partial) {
  __shared__ double shared32[32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kSquareChunk;
  const int64_t end = min(n, begin + kSquareChunk);
  double sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const double x = static_cast<double>(to_acc<A>(w[i]));
    sum = __dadd_rn(sum, __dmul_rn(x, x));
  }
  sum = block_sum(sum, shared32);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// out = Σ partial[c] over chunks: thread j adds chunks j, j + 1024, ... in order, then block_sum.
__global__ void sum_partials_kernel(const double* __restrict__ partial, int64_t chunks, double* __restrict__ out) {
  __shared__ double shared32[32];
  double sum = 0;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) sum = __dadd_rn(sum, partial[c]);
  sum = block_sum(sum, shared32);
  if (threadIdx.x == 0) *out = sum;
}

}  // namespace

void tail_accumulate(Tensor& acc, const Tensor& w, double rate, bool seed) {
  dispatch_floating_cuda(w.dtype(), "tail_accumulate", [&]<typename T, typename A>() {
    T* wp = device_ptr<T>(w);
    A* ap = device_ptr<A>(acc);
    if (seed) {
      launch_elementwise<Elementwise::seed_copy>(wp, ap, w.numel(), A(0));
    } else {
      launch_elementwise<Elementwise::accumulate>(wp, ap, w.numel(), static_cast<A>(rate));
    }
  });
}

void tail_ship(Tensor& w, const Tensor& acc, double factor) {
  dispatch_floating_cuda(w.dtype(), "tail_ship", [&]<typename T, typename A>() {
    T* wp = device_ptr<T>(w);
    A* ap = device_ptr<A>(acc);
    if (factor == 1.0) {
      launch_elementwise<Elementwise::replace>(wp, ap, w.numel(), A(1));
    } else {
      launch_elementwise<Elementwise::ship>(wp, ap, w.numel(), static_cast<A>(factor));
    }
  });
}

void sum_of_squares(const Tensor& w, double& sum) {
  const int64_t n = w.numel();
  sum = 0;
  if (n == 0) return;
  const int64_t chunks = (n + kSquareChunk - 1) / kSquareChunk;
  GPT_CHECK(chunks <= INT32_MAX, "sum_of_squares: ", w.describe(), " has too many elements for one CUDA grid");
  DeviceScratch partial(sizeof(double) * static_cast<size_t>(chunks + 1));
  dispatch_floating_cuda(w.dtype(), "sum_of_squares", [&]<typename T, typename A>() {
    square_sum_chunks_kernel<T, A>
        <<<static_cast<unsigned>(chunks), kThreads, 0, op_stream()>>>(device_ptr<T>(w), n, partial.as<double>());
    GPT_CUDA_CHECK_LAUNCH();
  });
  double* total = partial.as<double>() + chunks;
  sum_partials_kernel<<<1, 1024, 0, op_stream()>>>(partial.as<double>(), chunks, total);
  GPT_CUDA_CHECK_LAUNCH();
  GPT_CUDA_CHECK(cudaMemcpyAsync(&sum, total, sizeof(double), cudaMemcpyDeviceToHost, op_stream()));
  GPT_CUDA_CHECK(cudaStreamSynchronize(op_stream()));
}

void scale_in_place(Tensor& w, double factor) {
  dispatch_floating_cuda(w.dtype(), "scale_in_place", [&]<typename T, typename A>() {
    launch_elementwise<Elementwise::scale>(device_ptr<T>(w), static_cast<A*>(nullptr), w.numel(),
                                           static_cast<A>(factor));
  });
}

}  // namespace gpt::cuda
