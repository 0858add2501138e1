// CUDA kernels of kernels/activation.h: grid-stride pointwise kernels over 16-byte packs (one pass, math in the
// accumulation type, rounded once), and a deterministic two-stage column sum for bias_backward.
#include <cmath>

#include "kernels/activation.h"
#include "kernels/cuda/device_utils.cuh"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;

template <typename A>
__device__ __forceinline__ A normal_cdf(A x) {
  return A(0.5) * (A(1) + erf(x * A(0.70710678118654752440)));
}
template <typename A>
__device__ __forceinline__ A normal_pdf(A x) {
  return A(0.39894228040143267794) * exp(A(-0.5) * x * x);
}

struct GeluFwd {
  template <typename A>
  __device__ A operator()(A x, A) const {
    return x * normal_cdf(x);
  }
};
struct GeluBwd {  // a = dy, b = x, acc = dx
  template <typename A>
  __device__ A operator()(A dy, A x, A acc) const {
    return acc + dy * (normal_cdf(x) + x * normal_pdf(x));
  }
};
struct ReluSquareFwd {
  template <typename A>
  __device__ A operator()(A x, A) const {
    const A r = x > A(0) ? x : A(0);
    return r * r;
  }
};
struct ReluSquareBwd {  // a = dpost, b = post, acc = dpre
  template <typename A>
  __device__ A operator()(A dpost, A post, A acc) const {
    return acc + A(2) * sqrt(post) * dpost;
  }
};

// out[i] = f(a[i], out[i]) (unary; out may alias a).
template <typename T, typename A, int VEC, typename F>
__global__ void unary_kernel(const T* a, T* out, int64_t packs, F f) {
  for (int64_t p = blockIdx.x * int64_t{kThreads} + threadIdx.x; p < packs; p += gridDim.x * int64_t{kThreads}) {
    const Pack<T, VEC> x = load_pack<T, VEC>(a + p * VEC);
    Pack<T, VEC> y;
#pragma unroll
    for (int j = 0; j < VEC; ++j) y.v[j] = from_acc<T>(f(to_acc<A>(x.v[j]), A(0)));
    store_pack<T, VEC>(out + p * VEC, y);
  }
}

// acc[i] = f(a[i], b[i], acc[i]) (the accumulating backwards), or f(a[i], b[i], 0) without reading acc when not
// kAdd (acc may then be a: each pack is read before it is written).
template <typename T, typename A, int VEC, bool kAdd, typename F>
__global__ void accumulate_kernel(const T* a, const T* b, T* acc, int64_t packs, F f) {
  for (int64_t p = blockIdx.x * int64_t{kThreads} + threadIdx.x; p < packs; p += gridDim.x * int64_t{kThreads}) {
    const Pack<T, VEC> x = load_pack<T, VEC>(a + p * VEC), y = load_pack<T, VEC>(b + p * VEC);
    Pack<T, VEC> z;
    if constexpr (kAdd) z = load_pack<T, VEC>(acc + p * VEC);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A start = kAdd ? to_acc<A>(z.v[j]) : A(0);
      z.v[j] = from_acc<T>(f(to_acc<A>(x.v[j]), to_acc<A>(y.v[j]), start));
    }
    store_pack<T, VEC>(acc + p * VEC, z);
  }
}

template <typename T, typename A, int VEC>
__global__ void bias_add_kernel(const T* x, const T* bias, T* y, int64_t packs, int64_t n) {
  for (int64_t p = blockIdx.x * int64_t{kThreads} + threadIdx.x; p < packs; p += gridDim.x * int64_t{kThreads}) {
    const int64_t c = (p * VEC) % n;
    const Pack<T, VEC> v = load_pack<T, VEC>(x + p * VEC), b = load_pack<T, VEC>(bias + c);
    Pack<T, VEC> o;
#pragma unroll
    for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(to_acc<A>(v.v[j]) + to_acc<A>(b.v[j]));
    store_pack<T, VEC>(y + p * VEC, o);
  }
}

// Stage 1: partial[chunk][c] = Σ_{rows of chunk, in order, strided by blockDim.y then tree} dy[r, c].
constexpr int kColTile = 32, kRowThreads = 8, kRowsPerChunk = 256;
template <typename T, typename A>
__global__ void column_sum_partial_kernel(const T* dy, A* partial, int64_t rows, int64_t n) {
  __shared__ A tile[kRowThreads][kColTile + 1];
  const int64_t c = blockIdx.x * int64_t{kColTile} + threadIdx.x;
  const int64_t r0 = blockIdx.y * int64_t{kRowsPerChunk};
  const int64_t r1 = min(rows, r0 + kRowsPerChunk);
  A sum = 0;
  if (c < n) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowThreads) sum += to_acc<A>(dy[r * n + c]);
  }
  tile[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < n) {
    A total = 0;
    for (int i = 0; i < kRowThreads; ++i) total += tile[i][threadIdx.x];
    partial[blockIdx.y * n + c] = total;
  }
}

// Stage 2: dbias[c] += Σ_chunks partial[chunk][c] in chunk order.
template <typename T, typename A>
__global__ void column_sum_finish_kernel(const A* partial, int64_t chunks, T* dbias, int64_t n) {
  const int64_t c = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (c >= n) return;
  A total = 0;
  for (int64_t k = 0; k < chunks; ++k) total += partial[k * n + c];
  dbias[c] = from_acc<T>(to_acc<A>(dbias[c]) + total);
}

template <typename T>
bool packable(int64_t n, std::initializer_list<const void*> ptrs) {
  if (n % kVec16<T> != 0) return false;
  for (const void* p : ptrs) {
    if (!aligned16(p)) return false;
  }
  return true;
}

template <typename F>
void launch_unary(const Tensor& a, Tensor& out, const char* op, F f) {
  const int64_t n = a.numel();
  if (n == 0) return;
  dispatch_floating_cuda(a.dtype(), op, [&]<typename T, typename A>() {
    constexpr int kVec = kVec16<T>;
    if (packable<T>(n, {a.raw(), out.raw()})) {
      unary_kernel<T, A, kVec>
          <<<blocks_for(n / kVec, kThreads, 1 << 16), kThreads>>>(device_ptr<T>(a), device_ptr<T>(out), n / kVec, f);
    } else {
      unary_kernel<T, A, 1><<<blocks_for(n, kThreads, 1 << 16), kThreads>>>(device_ptr<T>(a), device_ptr<T>(out), n, f);
    }
  });
  GPT_CUDA_CHECK_LAUNCH();
}

template <typename F>
void launch_accumulate(const Tensor& a, const Tensor& b, Tensor& acc, const char* op, F f,
                       GradWrite write = GradWrite::add) {
  const int64_t n = a.numel();
  if (n == 0) return;
  dispatch_floating_cuda(a.dtype(), op, [&]<typename T, typename A>() {
    constexpr int kVec = kVec16<T>;
    const bool packed = packable<T>(n, {a.raw(), b.raw(), acc.raw()});
    auto launch = [&]<int VEC, bool kAdd>() {
      accumulate_kernel<T, A, VEC, kAdd><<<blocks_for(n / VEC, kThreads, 1 << 16), kThreads>>>(
          device_ptr<T>(a), device_ptr<T>(b), device_ptr<T>(acc), n / VEC, f);
    };
    const bool add = write == GradWrite::add;
    if (packed && add) launch.template operator()<kVec, true>();
    if (packed && !add) launch.template operator()<kVec, false>();
    if (!packed && add) launch.template operator()<1, true>();
    if (!packed && !add) launch.template operator()<1, false>();
  });
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) { launch_unary(x, y, "gelu_forward", GeluFwd{}); }
void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  launch_accumulate(dy, x, dx, "gelu_backward", GeluBwd{});
}
void relu_square_forward(const Tensor& pre, Tensor& post) {
  launch_unary(pre, post, "relu_square_forward", ReluSquareFwd{});
}
void relu_square_backward(const Tensor& dpost, const Tensor& post, Tensor& dpre, GradWrite write) {
  launch_accumulate(dpost, post, dpre, "relu_square_backward", ReluSquareBwd{}, write);
}

void bias_add_forward(const Tensor& x, const Tensor& bias, Tensor& y) {
  const int64_t total = x.numel(), n = x.size(-1);
  if (total == 0) return;
  dispatch_floating_cuda(x.dtype(), "bias_add_forward", [&]<typename T, typename A>() {
    constexpr int kVec = kVec16<T>;
    if (packable<T>(n, {x.raw(), bias.raw(), y.raw()})) {
      bias_add_kernel<T, A, kVec><<<blocks_for(total / kVec, kThreads, 1 << 16), kThreads>>>(
          device_ptr<T>(x), device_ptr<T>(bias), device_ptr<T>(y), total / kVec, n);
    } else {
      bias_add_kernel<T, A, 1><<<blocks_for(total, kThreads, 1 << 16), kThreads>>>(
          device_ptr<T>(x), device_ptr<T>(bias), device_ptr<T>(y), total, n);
    }
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void bias_backward(const Tensor& dy, Tensor& dbias) {
  const int64_t n = dy.size(-1), rows = dy.numel() / n;
  if (n == 0) return;
  const int64_t chunks = std::max<int64_t>(1, (rows + kRowsPerChunk - 1) / kRowsPerChunk);
  GPT_CHECK(chunks < 65536, "bias_backward: ", rows, " rows exceed the CUDA column-sum grid");
  dispatch_floating_cuda(dy.dtype(), "bias_backward", [&]<typename T, typename A>() {
    DeviceScratch partial(static_cast<size_t>(chunks * n) * sizeof(A), kLegacyDefaultStream);
    const dim3 grid(static_cast<unsigned>((n + kColTile - 1) / kColTile), static_cast<unsigned>(chunks));
    column_sum_partial_kernel<T, A><<<grid, dim3(kColTile, kRowThreads)>>>(device_ptr<T>(dy), partial.as<A>(), rows, n);
    GPT_CUDA_CHECK_LAUNCH();
    column_sum_finish_kernel<T, A>
        <<<blocks_for(n, kThreads), kThreads>>>(partial.as<A>(), chunks, device_ptr<T>(dbias), n);
    GPT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpt::cuda
