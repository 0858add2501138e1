// CUDA kernels of kernels/fp8.h. Conversions are the hardware RNE saturating ones, with infinities and NaN handled
// first so that every value encodes exactly as the CPU's float_to_e4m3 / float_to_e5m2. Scales stay on the device.
// quantize and amax move 16-byte packs of the input (their byte floors are what the §7.2 MLP forward pays per
// layer); fp8_gemm is cuBLASLt's FP8 GEMM on K-contiguous operands (byte transposes where a flag asks for the
// other layout), with the widened bf16 product kept for shapes the FP8 kernels refuse.
#include <algorithm>
#include <array>
#include <initializer_list>
#include <mutex>

#include "kernels/cuda/fp8_convert.cuh"
#include "kernels/cuda/fp8_variants.h"
#include "kernels/fp8.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;

// q = fp8(x / scale): the division as divide_by_scale, two elements per cvt (the same bits as one IEEE division
// and one cvt per element).
template <typename T, typename A, bool kE5m2, int VEC>
__global__ void quantize_kernel(const T* __restrict__ x, const float* __restrict__ scale, uint8_t* __restrict__ q,
                                int64_t packs) {
  const float s = scale[0];
  const float r = __frcp_rn(s);
  for (int64_t p = blockIdx.x * int64_t{kThreads} + threadIdx.x; p < packs; p += gridDim.x * int64_t{kThreads}) {
    const Pack<T, VEC> v = load_pack<T, VEC>(x + p * VEC);
    float scaled[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) scaled[j] = divide_by_scale(static_cast<float>(to_acc<A>(v.v[j])), s, r);
    const Pack<uint8_t, VEC> out = fp8_pack<kE5m2, VEC>(scaled);
    store_pack<uint8_t, VEC>(q + p * VEC, out);
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

// The bits of |v| as a float, ordered like the integers; NaN maps to the largest pattern so that it wins every max.
__device__ __forceinline__ unsigned abs_bits(float v) {
  const float a = fabsf(v);
  return isnan(a) ? 0xFFFFFFFFu : __float_as_uint(a);
}

// The running max and the arrival count of one grid-wide max (block_max_finish). Every kernel that uses them leaves
// both at zero, so the next one starts clean without a memset; the kernels run in order on the legacy default
// stream (runtime.h), so one pair per device serves every call. Made zero once and never freed, like the memory
// pool (kernels/cuda/memory.cu): the driver reclaims it at exit.
struct GridMaxScratch {
  unsigned bits;
  unsigned arrived;
};

GridMaxScratch* grid_max_scratch() {
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  static std::array<GridMaxScratch*, kMaxDevices> per_device{};
  int device = 0;
  GPT_CUDA_CHECK(cudaGetDevice(&device));
  GPT_CHECK(device >= 0 && device < kMaxDevices, "fp8 amax: device ", device, " beyond the ", kMaxDevices,
            " supported");
  std::lock_guard lock(mutex);
  GridMaxScratch*& scratch = per_device[static_cast<size_t>(device)];
  if (scratch == nullptr) {
    void* p = nullptr;
    GPT_CUDA_CHECK(cudaMalloc(&p, sizeof(GridMaxScratch)));
    GPT_CUDA_CHECK(cudaMemset(p, 0, sizeof(GridMaxScratch)));
    scratch = static_cast<GridMaxScratch*>(p);
  }
  return scratch;
}

// Where a grid-wide max goes: max |x| (NaN restored) and/or the scale max(amax, floor)·factor (scale_from_amax's
// arithmetic; a NaN amax stays NaN), either may be null.
struct GridMaxOut {
  GridMaxScratch* scratch;
  float* amax;
  float* scale;
  float factor, floor;
};

GridMaxOut amax_out(Tensor& amax) { return {grid_max_scratch(), device_ptr<float>(amax), nullptr, 0.0f, 0.0f}; }
GridMaxOut scale_out(Tensor& scale, float factor, float floor) {
  return {grid_max_scratch(), nullptr, device_ptr<float>(scale), factor, floor};
}

// Folds the block's m into the grid's max; the last block to arrive writes the outputs and leaves the scratch at
// zero. Max is order-free, so the result is deterministic. One kernel instead of a memset, the reduction and a
// one-thread kernel that turns the NaN pattern back into NaN (and another that makes the scale).
__device__ __forceinline__ void block_max_finish(unsigned m, const GridMaxOut& out) {
  __shared__ unsigned shared32[32];
  m = warp_max(m);
  if (threadIdx.x % 32 == 0) shared32[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kThreads / 32; ++w) m = max(m, shared32[w]);
  atomicMax(&out.scratch->bits, m);
  __threadfence();  // this block's max is in before its arrival is counted
  if (atomicAdd(&out.scratch->arrived, 1u) != gridDim.x - 1) return;
  const unsigned bits = atomicExch(&out.scratch->bits, 0u);  // every other block's max is in
  atomicExch(&out.scratch->arrived, 0u);
  const float a = bits == 0xFFFFFFFFu ? NAN : __uint_as_float(bits);
  if (out.amax != nullptr) *out.amax = a;
  if (out.scale != nullptr) *out.scale = (a < out.floor ? out.floor : a) * out.factor;
}

// max |x| (NaN wins, as the CPU reference propagates it).
template <typename T, typename A, int VEC>
__global__ void amax_kernel(const T* __restrict__ x, int64_t packs, GridMaxOut out) {
  unsigned m = 0;
#pragma unroll 4
  for (int64_t p = blockIdx.x * int64_t{kThreads} + threadIdx.x; p < packs; p += gridDim.x * int64_t{kThreads}) {
    const Pack<T, VEC> v = load_pack<T, VEC>(x + p * VEC);
#pragma unroll
    // Rounding |x| to float before the max keeps f64's answer: rounding is monotonic.
    for (int j = 0; j < VEC; ++j) m = max(m, abs_bits(static_cast<float>(to_acc<A>(v.v[j]))));
  }
  block_max_finish(m, out);
}

// post = T(relu(pre)²), q = fp8(post / scale), and max |post| folded into m, for one pack of pre; the division and
// the conversion as the version has them (below).
template <typename T, typename A, bool kE5m2, int VEC, int kVersion>
__device__ __forceinline__ void relu_square_quantize_pack(const Pack<T, VEC>& x, float s, float r, T* __restrict__ post,
                                                          uint8_t* __restrict__ q, unsigned& m) {
  Pack<T, VEC> y;
  float scaled[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const A x_j = to_acc<A>(x.v[j]);
    const A relu = x_j > A(0) ? x_j : A(0);  // as relu_square_forward's kernel
    y.v[j] = from_acc<T>(relu * relu);
    const float stored = static_cast<float>(to_acc<A>(y.v[j]));
    scaled[j] = kVersion == 1 ? stored / s : divide_by_scale(stored, s, r);
    m = max(m, abs_bits(stored));
  }
  store_pack<T, VEC>(post, y);
  Pack<uint8_t, VEC> y8;
  if constexpr (kVersion == 1) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) y8.v[j] = float_to_fp8_device<kE5m2>(scaled[j]);
  } else {
    y8 = fp8_pack<kE5m2, VEC>(scaled);
  }
  store_pack<uint8_t, VEC>(q, y8);
}

// relu_square_forward, quantize and amax in one pass over pre (the §7.2 activation; saves two reads of post per
// MLP layer): one pack per thread, one atomicMax per block. Versions (kernels/cuda/fp8_variants.h):
//   v1: an IEEE division and one cvt per element: ≈ 1.85 TB/s at 49,152 × 3,072 on the H200, bound by those
//       instructions, not by memory (relu² alone moves its bytes at ≈ 3.7 TB/s).
//   v2: the division as divide_by_scale (one reciprocal per thread, three instructions per element) and two
//       elements per cvt; the same bits. 217–235 µs against v1's 393–395 in the same runs (3.2–3.5 TB/s).
template <typename T, typename A, bool kE5m2, int VEC, int kVersion>
__global__ void relu_square_quantize_kernel(const T* __restrict__ pre, const float* __restrict__ scale,
                                            T* __restrict__ post, uint8_t* __restrict__ q, int64_t packs,
                                            GridMaxOut max_out) {
  const float s = scale[0];
  const float r = __frcp_rn(s);
  unsigned m = 0;
  for (int64_t p = blockIdx.x * int64_t{kThreads} + threadIdx.x; p < packs; p += gridDim.x * int64_t{kThreads}) {
    relu_square_quantize_pack<T, A, kE5m2, VEC, kVersion>(load_pack<T, VEC>(pre + p * VEC), s, r, post + p * VEC,
                                                          q + p * VEC, m);
  }
  block_max_finish(m, max_out);
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

// Blocks of a kernel that ends in block_max_finish: every block makes two atomics on one address (the max and its
// arrival), which serialise, so the grid stays at a few waves and each thread walks a strided run of packs. At
// 49,152 × 3,072 the uncapped grid (65,536 blocks) made the fused §7.2 activation 28.7 ms per H100 step against
// 24.0 ms with one atomic per block.
constexpr unsigned kMaxReductionBlocks = 2048;
unsigned reduction_grid_for(int64_t n) { return std::min(grid_for(n), kMaxReductionBlocks); }

}  // namespace

void quantize_fp8(const Tensor& x, const Tensor& scale, Tensor& q) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const bool e5m2 = q.dtype() == DType::e5m2;
  dispatch_floating_cuda(x.dtype(), "quantize_fp8", [&]<typename T, typename A>() {
    auto* qp = static_cast<uint8_t*>(const_cast<void*>(q.raw()));
    constexpr int kVec = kVec16<T>;
    const bool packed = n % kVec == 0 && aligned16(x.raw()) && reinterpret_cast<uintptr_t>(qp) % kVec == 0;
    auto launch = [&]<int VEC, bool kE5m2>() {
      const int64_t packs = n / VEC;
      quantize_kernel<T, A, kE5m2, VEC>
          <<<grid_for(packs), kThreads>>>(device_ptr<T>(x), device_ptr<float>(scale), qp, packs);
    };
    launch_packed_fp8<kVec>(packed, e5m2, launch);
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

namespace {

// The grid-wide max |x| into `out` (amax_out or scale_out), one kernel.
void launch_amax(const Tensor& x, const GridMaxOut& out) {
  const int64_t n = x.numel();
  dispatch_floating_cuda(x.dtype(), "amax", [&]<typename T, typename A>() {
    constexpr int kVec = kVec16<T>;
    // An empty x still runs one block, which writes the max 0.
    if (n % kVec == 0 && aligned16(x.raw())) {
      const int64_t packs = n / kVec;
      amax_kernel<T, A, kVec><<<reduction_grid_for(packs), kThreads>>>(device_ptr<T>(x), packs, out);
    } else {
      amax_kernel<T, A, 1><<<reduction_grid_for(n), kThreads>>>(device_ptr<T>(x), n, out);
    }
  });
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void amax(const Tensor& x, Tensor& out) { launch_amax(x, amax_out(out)); }

void amax_scale(const Tensor& x, float factor, float floor, Tensor& scale) {
  launch_amax(x, scale_out(scale, factor, floor));
}

namespace {

template <int kVersion>
void relu_square_quantize_version(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max) {
  const int64_t n = pre.numel();
  const bool e5m2 = q.dtype() == DType::e5m2;
  const GridMaxOut max_out = amax_out(post_max);
  dispatch_floating_cuda(pre.dtype(), "relu_square_quantize_fp8", [&]<typename T, typename A>() {
    constexpr int kVec = kVec16<T>;
    auto* qp = static_cast<uint8_t*>(const_cast<void*>(q.raw()));
    const bool packed =
        n % kVec == 0 && aligned16(pre.raw()) && aligned16(post.raw()) && reinterpret_cast<uintptr_t>(qp) % kVec == 0;
    auto launch = [&]<int VEC, bool kE5m2>() {
      const int64_t packs = n / VEC;  // an empty pre still runs one block, which writes the max 0
      relu_square_quantize_kernel<T, A, kE5m2, VEC, kVersion><<<reduction_grid_for(packs), kThreads>>>(
          device_ptr<T>(pre), device_ptr<float>(scale), device_ptr<T>(post), qp, packs, max_out);
    };
    launch_packed_fp8<kVec>(packed, e5m2, launch);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void relu_square_quantize_fp8_v1(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max) {
  relu_square_quantize_version<1>(pre, scale, post, q, post_max);
}

void relu_square_quantize_fp8_v2(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max) {
  relu_square_quantize_version<2>(pre, scale, post, q, post_max);
}

void relu_square_quantize_fp8(const Tensor& pre, const Tensor& scale, Tensor& post, Tensor& q, Tensor& post_max) {
  relu_square_quantize_fp8_v2(pre, scale, post, q, post_max);
}

void scale_from_amax(const Tensor& amax, float factor, float floor, Tensor& scale) {
  scale_from_amax_kernel<<<1, 1>>>(device_ptr<float>(amax), factor, floor, device_ptr<float>(scale));
  GPT_CUDA_CHECK_LAUNCH();
}

namespace {

// cuBLASLt's FP8 kernels want every dimension a multiple of 16 and 16-byte aligned operands and scale pointers.
bool tensor_core_fp8_fits(int64_t m, int64_t n, int64_t k, std::initializer_list<const Tensor*> tensors) {
  if (m % 16 != 0 || n % 16 != 0 || k % 16 != 0) return false;
  for (const Tensor* t : tensors) {
    if (!aligned16(t->raw())) return false;
  }
  return true;
}

// Exact but slow: operands widened to bf16 (every e4m3/e5m2 value is a bf16 value), bf16 GEMM into an fp32
// scratch, then alpha·a_scale·b_scale (and beta·C) in one epilogue, rounding once into C.
void widened_fp8_gemm(const Tensor& a8, const Tensor& b8, const Tensor& a_scale, const Tensor& b_scale, Tensor& c,
                      const GemmArgs& args) {
  auto widen = [](const Tensor& q) {
    Tensor wide = Tensor::empty(q.shape(), DType::bf16, Device::cuda);
    const int64_t n = q.numel();
    if (n == 0) return wide;
    const auto* qp = static_cast<const uint8_t*>(q.raw());
    if (q.dtype() == DType::e5m2) {
      dequantize_kernel<__nv_bfloat16, true>
          <<<grid_for(n), kThreads>>>(qp, nullptr, device_ptr<__nv_bfloat16>(wide), n);
    } else {
      dequantize_kernel<__nv_bfloat16, false>
          <<<grid_for(n), kThreads>>>(qp, nullptr, device_ptr<__nv_bfloat16>(wide), n);
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
    scale_epilogue_kernel<__nv_bfloat16>
        <<<grid_for(n), kThreads>>>(device_ptr<float>(product), device_ptr<float>(a_scale), device_ptr<float>(b_scale),
                                    args.alpha, args.beta, device_ptr<__nv_bfloat16>(c), n);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void fp8_gemm(const Tensor& a8, const Tensor& b8, const Tensor& a_scale, const Tensor& b_scale, Tensor& c,
              const GemmArgs& args, Fp8Accumulation accumulation) {
  const int64_t m = c.size(0), n = c.size(1), k = args.trans_a ? a8.size(0) : a8.size(1);
  if (!tensor_core_fp8_fits(m, n, k, {&a8, &b8, &c, &a_scale, &b_scale})) {
    widened_fp8_gemm(a8, b8, a_scale, b_scale, c, args);
    return;
  }
  // gemm_fp8 (checked public entry) computes A·Bᵀ with A [M, K] and B [N, K].
  // The K-contiguous copies of operands stored the other way.
  const Tensor a_mk = args.trans_a ? transpose_fp8_bytes(a8) : a8;
  const Tensor b_nk = args.trans_b ? b8 : transpose_fp8_bytes(b8);
  gpt::gemm_fp8(a_mk, b_nk, c, a_scale, b_scale,
                {.alpha = args.alpha, .beta = args.beta, .fast_accum = accumulation == Fp8Accumulation::fast});
}

}  // namespace gpt::cuda
