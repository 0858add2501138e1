// CUDA kernels of kernels/fp8.h. Conversions are the hardware RNE saturating ones, with infinities and NaN handled
// first so that every value encodes exactly as the CPU's float_to_e4m3 / float_to_e5m2. Scales stay on the device.
// fp8_gemm widens the operands to bf16 (exact: every e4m3/e5m2 value is a bf16 value), runs the bf16 GEMM into an
// fp32 scratch and applies alpha·a_scale·b_scale (and beta·C) in one epilogue, rounding once into C.
#include <algorithm>

#include "kernels/cuda/ops_common.cuh"
#include "kernels/fp8.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T, typename A, bool kE5m2>
__global__ void quantize_kernel(const T* __restrict__ x, const float* __restrict__ scale, uint8_t* __restrict__ q,
                                int64_t n) {
  const float s = scale[0];
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += gridDim.x * int64_t{kThreads}) {
    q[i] = float_to_fp8_device<kE5m2>(static_cast<float>(to_acc<A>(x[i])) / s);
  }
}

template <typename T, bool kE5m2>
__global__ void dequantize_kernel(const uint8_t* __restrict__ q, const float* __restrict__ scale, T* __restrict__ x,
                                  int64_t n) {
  const float s = scale ? scale[0] : 1.0f;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += gridDim.x * int64_t{kThreads}) {
    x[i] = from_acc<T>(fp8_to_float_device<kE5m2>(q[i]) * s);
  }
}

// max |x| as the bits of a non-negative float (ordered like the integers); NaN maps to the largest pattern so that
// it wins every max, as the CPU reference propagates it.
template <typename T, typename A>
__global__ void amax_kernel(const T* __restrict__ x, int64_t n, unsigned* __restrict__ out_bits) {
  __shared__ unsigned shared32[32];
  unsigned m = 0;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += gridDim.x * int64_t{kThreads}) {
    // Rounding |x| to float before the max keeps f64's answer: rounding is monotonic.
    const float a = fabsf(static_cast<float>(to_acc<A>(x[i])));
    const unsigned bits = isnan(a) ? 0xFFFFFFFFu : __float_as_uint(a);
    m = max(m, bits);
  }
  for (int offset = 16; offset > 0; offset >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (threadIdx.x % 32 == 0) shared32[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) m = max(m, shared32[w]);
    atomicMax(out_bits, m);
  }
}

__global__ void amax_finish_kernel(float* out) {
  const unsigned bits = __float_as_uint(out[0]);
  if (bits == 0xFFFFFFFFu) out[0] = NAN;
}

__global__ void scale_from_amax_kernel(const float* amax, float factor, float floor, float* scale) {
  const float a = amax[0];
  scale[0] = (a < floor ? floor : a) * factor;  // NaN amax stays NaN, as std::max(NaN, floor) does
}

template <typename T>
__global__ void scale_epilogue_kernel(const float* __restrict__ product, const float* __restrict__ a_scale,
                                      const float* __restrict__ b_scale, float alpha, float beta, T* c, int64_t n) {
  const float factor = alpha * a_scale[0] * b_scale[0];
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += gridDim.x * int64_t{kThreads}) {
    float v = product[i] * factor;
    if (beta != 0.0f) v += beta * to_acc<float>(c[i]);
    c[i] = from_acc<T>(v);
  }
}

unsigned grid_for(int64_t n) { return blocks_for(n, kThreads, 1 << 16); }

}  // namespace

void quantize_fp8(const Tensor& x, const Tensor& scale, Tensor& q) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const bool e5m2 = q.dtype() == DType::e5m2;
  dispatch_floating_cuda(x.dtype(), "quantize_fp8", [&]<typename T, typename A>() {
    auto* qp = static_cast<uint8_t*>(const_cast<void*>(q.raw()));
    if (e5m2) {
      quantize_kernel<T, A, true><<<grid_for(n), kThreads>>>(device_ptr<T>(x), device_ptr<float>(scale), qp, n);
    } else {
      quantize_kernel<T, A, false><<<grid_for(n), kThreads>>>(device_ptr<T>(x), device_ptr<float>(scale), qp, n);
    }
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void dequantize_fp8(const Tensor& q, const Tensor& scale, Tensor& x) {
  const int64_t n = q.numel();
  if (n == 0) return;
  const bool e5m2 = q.dtype() == DType::e5m2;
  dispatch_floating_cuda(x.dtype(), "dequantize_fp8", [&]<typename T, typename A>() {
    const auto* qp = static_cast<const uint8_t*>(q.raw());
    if (e5m2) {
      dequantize_kernel<T, true><<<grid_for(n), kThreads>>>(qp, device_ptr<float>(scale), device_ptr<T>(x), n);
    } else {
      dequantize_kernel<T, false><<<grid_for(n), kThreads>>>(qp, device_ptr<float>(scale), device_ptr<T>(x), n);
    }
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void amax(const Tensor& x, Tensor& out) {
  const int64_t n = x.numel();
  GPT_CUDA_CHECK(cudaMemsetAsync(const_cast<void*>(out.raw()), 0, sizeof(float), cudaStream_t{}));
  if (n > 0) {
    dispatch_floating_cuda(x.dtype(), "amax", [&]<typename T, typename A>() {
      amax_kernel<T, A><<<std::min<unsigned>(grid_for(n), 1024), kThreads>>>(
          device_ptr<T>(x), n, static_cast<unsigned*>(const_cast<void*>(out.raw())));
    });
    GPT_CUDA_CHECK_LAUNCH();
  }
  amax_finish_kernel<<<1, 1>>>(device_ptr<float>(out));
  GPT_CUDA_CHECK_LAUNCH();
}

void scale_from_amax(const Tensor& amax, float factor, float floor, Tensor& scale) {
  scale_from_amax_kernel<<<1, 1>>>(device_ptr<float>(amax), factor, floor, device_ptr<float>(scale));
  GPT_CUDA_CHECK_LAUNCH();
}

void fp8_gemm(const Tensor& a8, const Tensor& b8, const Tensor& a_scale, const Tensor& b_scale, Tensor& c,
              const GemmArgs& args) {
  auto widen = [](const Tensor& q) {
    Tensor wide = Tensor::empty(q.shape(), DType::bf16, Device::cuda);
    const int64_t n = q.numel();
    if (n == 0) return wide;
    const auto* qp = static_cast<const uint8_t*>(q.raw());
    if (q.dtype() == DType::e5m2) {
      dequantize_kernel<__nv_bfloat16, true><<<grid_for(n), kThreads>>>(qp, nullptr, device_ptr<__nv_bfloat16>(wide), n);
    } else {
      dequantize_kernel<__nv_bfloat16, false><<<grid_for(n), kThreads>>>(qp, nullptr, device_ptr<__nv_bfloat16>(wide),
                                                                         n);
    }
    GPT_CUDA_CHECK_LAUNCH();
    return wide;
  };
  const Tensor a = widen(a8), b = widen(b8);
  Tensor product = Tensor::empty(c.shape(), DType::f32, Device::cuda);
  GemmArgs plain = args;
  plain.alpha = 1.0f;
  plain.beta = 0.0f;
  gpt::gemm(a, b, product, plain);  // checked public entry, dispatches to the CUDA GEMM
  const int64_t n = c.numel();
  if (n == 0) return;
  if (c.dtype() == DType::f32) {
    scale_epilogue_kernel<float><<<grid_for(n), kThreads>>>(device_ptr<float>(product), device_ptr<float>(a_scale),
                                                            device_ptr<float>(b_scale), args.alpha, args.beta,
                                                            device_ptr<float>(c), n);
  } else {
    scale_epilogue_kernel<__nv_bfloat16><<<grid_for(n), kThreads>>>(
        device_ptr<float>(product), device_ptr<float>(a_scale), device_ptr<float>(b_scale), args.alpha, args.beta,
        device_ptr<__nv_bfloat16>(c), n);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
