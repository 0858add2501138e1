// The wgmma building blocks of kernels/cuda/wgmma.cuh against CPU products: the 128-byte swizzle, K-major
// descriptors with both operands in shared memory (Q·Kᵀ), and register A with an MN-major B (P·V). A failure here
// means a descriptor or fragment convention is wrong, which every wgmma kernel would inherit.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/wgmma.cuh"
#include "kernels/tensor.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using Bf16 = __nv_bfloat16;
constexpr int kRows = 64, kDepth = 128, kSlabBytes = kRows * cuda::wgmma::kSlabRowBytes;

// Copies a row-major [64 × 128] bf16 matrix into two swizzled 64-column slabs.
__device__ void store_swizzled(uint8_t* slabs, const Bf16* src) {
  for (int i = threadIdx.x; i < kRows * kDepth / 8; i += blockDim.x) {
    const int row = i / (kDepth / 8), chunk = i % (kDepth / 8);
    *reinterpret_cast<uint4*>(slabs + (chunk / 8) * kSlabBytes + cuda::wgmma::swizzled_offset(row, chunk % 8)) =
        *reinterpret_cast<const uint4*>(src + row * kDepth + chunk * 8);
  }
  // Generic-proxy stores must be made visible to the async proxy that wgmma reads shared memory through.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Writes accumulators of an m64nN product (N = 8·blocks) to row-major C [64 × N].
template <int kBlocks>
__device__ void store_accumulators(float* c, const float (&d)[4 * kBlocks]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  for (int j = 0; j < kBlocks; ++j) {
    for (int e = 0; e < 4; ++e) {
      const int row = 16 * warp + g + 8 * (e / 2), col = 8 * j + 2 * q + e % 2;
      c[row * 8 * kBlocks + col] = d[4 * j + e];
    }
  }
}

// C [64 × 64] = A [64 × 128] · B [64 × 128]ᵀ, both operands K-major in shared memory.
__global__ void k_major_product_kernel(const Bf16* a, const Bf16* b, float* c) {
  __shared__ __align__(1024) uint8_t smem[4 * kSlabBytes];
  store_swizzled(smem, a);
  store_swizzled(smem + 2 * kSlabBytes, b);
  __syncthreads();
  const uint32_t a_addr = cuda::wgmma::smem_addr(smem), b_addr = a_addr + 2 * kSlabBytes;
  float d[32] = {};
  cuda::wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kDepth / 16; ++kk) {
    const uint32_t offset = (kk / 4) * kSlabBytes + 32 * (kk % 4);
    cuda::wgmma::mma_m64n64k16_ss(d, cuda::wgmma::k_major(a_addr + offset), cuda::wgmma::k_major(b_addr + offset),
                                  kk > 0);
  }
  cuda::wgmma::commit();
  cuda::wgmma::wait<0>();
  cuda::wgmma::fence_operands(d);
  store_accumulators<8>(c, d);
}

// C [64 × 64] = A [64 × 128] · B [64 × 128]ᵀ with A as register A fragments (read from global memory) and B K-major
// in shared memory.
__global__ void register_a_k_major_product_kernel(const Bf16* a, const Bf16* b, float* c) {
  __shared__ __align__(1024) uint8_t smem[2 * kSlabBytes];
  store_swizzled(smem, b);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  auto pair = [&](int row, int col) { return *reinterpret_cast<const uint32_t*>(a + row * kDepth + col); };
  const uint32_t b_addr = cuda::wgmma::smem_addr(smem);
  float d[32] = {};
  cuda::wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kDepth / 16; ++kk) {
    const int r0 = 16 * warp + g, k0 = 16 * kk + 2 * q;
    const uint32_t frag[4] = {pair(r0, k0), pair(r0 + 8, k0), pair(r0, k0 + 8), pair(r0 + 8, k0 + 8)};
    const uint32_t offset = (kk / 4) * kSlabBytes + 32 * (kk % 4);
    cuda::wgmma::mma_m64n64k16_rs(d, frag, cuda::wgmma::k_major(b_addr + offset), kk > 0);
  }
  cuda::wgmma::commit();
  cuda::wgmma::wait<0>();
  cuda::wgmma::fence_operands(d);
  store_accumulators<8>(c, d);
}

// C [64 × 128] = P [64 × 64] · V [64 × 128]: P as register A fragments, V MN-major in shared memory, described
// with the given leading/stride byte offsets.
__global__ void mn_major_product_kernel(const Bf16* p, const Bf16* v, float* c, uint32_t leading, uint32_t stride) {
  __shared__ __align__(1024) uint8_t smem[2 * kSlabBytes];
  store_swizzled(smem, v);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  auto pair = [&](int row, int col) { return *reinterpret_cast<const uint32_t*>(p + row * kRows + col); };
  float d[64] = {};
  const uint32_t v_addr = cuda::wgmma::smem_addr(smem);
  cuda::wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < kRows / 16; ++kk) {
    const int r0 = 16 * warp + g, k0 = 16 * kk + 2 * q;
    const uint32_t a[4] = {pair(r0, k0), pair(r0 + 8, k0), pair(r0, k0 + 8), pair(r0 + 8, k0 + 8)};
    // k-step kk covers V rows 16kk … 16kk + 15: two 8-row groups, 16 · 128 bytes into each slab.
    cuda::wgmma::mma_m64n128k16_rs_mn(
        d, a, cuda::wgmma::descriptor(v_addr + kk * 16 * cuda::wgmma::kSlabRowBytes, leading, stride), kk > 0);
  }
  cuda::wgmma::commit();
  cuda::wgmma::wait<0>();
  cuda::wgmma::fence_operands(d);
  store_accumulators<16>(c, d);
}

std::vector<float> random_bf16_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  // Round through bf16 so that the CPU product sees exactly the GPU's operands.
  return Tensor::from_floats(v, {static_cast<int64_t>(n)}, DType::bf16).to_floats();
}

// Largest |gpu − ref| over the largest |ref|.
double max_error(const std::vector<float>& gpu, const std::vector<double>& ref) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::abs(gpu[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return err / scale;
}

using ABtKernel = void (*)(const Bf16*, const Bf16*, float*);

// Max relative error of kernel's C [64 × 64] = A·Bᵀ (A, B: random bf16 [64 × 128]) against the product in double.
double abt_product_error(ABtKernel kernel, uint64_t seed) {
  const std::vector<float> a = random_bf16_values(kRows * kDepth, seed);
  const std::vector<float> b = random_bf16_values(kRows * kDepth, seed + 1);
  std::vector<double> ref(kRows * kRows, 0.0);
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < kRows; ++j) {
      for (int k = 0; k < kDepth; ++k) ref[i * kRows + j] += double{a[i * kDepth + k]} * b[j * kDepth + k];
    }
  }
  const Tensor ad = Tensor::from_floats(a, {kRows, kDepth}, DType::bf16, Device::cuda);
  const Tensor bd = Tensor::from_floats(b, {kRows, kDepth}, DType::bf16, Device::cuda);
  Tensor cd = Tensor::empty({kRows, kRows}, DType::f32, Device::cuda);
  kernel<<<1, 128>>>(static_cast<const Bf16*>(ad.raw()), static_cast<const Bf16*>(bd.raw()),
                     static_cast<float*>(const_cast<void*>(cd.raw())));
  GPT_CUDA_CHECK(cudaDeviceSynchronize());
  return max_error(cd.to_floats(), ref);
}

TEST(Wgmma, KMajorSharedOperandsMatchCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  EXPECT_LT(abt_product_error(k_major_product_kernel, 1), 1e-5);
}

TEST(Wgmma, RegisterAWithKMajorSharedBMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  EXPECT_LT(abt_product_error(register_a_k_major_product_kernel, 5), 1e-5);
}

TEST(Wgmma, RegisterAWithMnMajorSharedBMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const std::vector<float> p = random_bf16_values(kRows * kRows, 3), v = random_bf16_values(kRows * kDepth, 4);
  std::vector<double> ref(kRows * kDepth, 0.0);
  for (int i = 0; i < kRows; ++i) {
    for (int k = 0; k < kRows; ++k) {
      for (int j = 0; j < kDepth; ++j) ref[i * kDepth + j] += double{p[i * kRows + k]} * v[k * kDepth + j];
    }
  }
  const Tensor pd = Tensor::from_floats(p, {kRows, kRows}, DType::bf16, Device::cuda);
  const Tensor vd = Tensor::from_floats(v, {kRows, kDepth}, DType::bf16, Device::cuda);
  Tensor cd = Tensor::empty({kRows, kDepth}, DType::f32, Device::cuda);
  auto run = [&](uint32_t leading, uint32_t stride) {
    mn_major_product_kernel<<<1, 128>>>(static_cast<const Bf16*>(pd.raw()), static_cast<const Bf16*>(vd.raw()),
                                        static_cast<float*>(const_cast<void*>(cd.raw())), leading, stride);
    GPT_CUDA_CHECK(cudaDeviceSynchronize());
    return max_error(cd.to_floats(), ref);
  };
  // The convention wgmma.cuh's mn_major() uses: slabs along N at the leading offset, 8-row groups at the stride.
  const double err = run(kSlabBytes, 1024);
  if (err >= 1e-5) {
    // Say which encoding would have matched, so that a wrong convention is fixed from one device run.
    const double swapped = run(1024, kSlabBytes);
    ADD_FAILURE() << "MN-major B with leading = " << kSlabBytes << ", stride = 1024: max error " << err
                  << "; swapped (leading = 1024, stride = " << kSlabBytes << "): " << swapped;
  }
}

// wgmma::advance steps a descriptor by adding to its address field only: for every 16-byte-aligned shared address
// a kernel can have (below 2^18) and every step that stays in range, the stepped descriptor must equal the one built
// from the stepped address, for both descriptor kinds. Counts the mismatches on the device.
__global__ void descriptor_step_kernel(uint32_t step, unsigned long long* mismatches) {
  const uint32_t addr = 16 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (addr + step >= (1u << 18)) return;
  const bool k_ok = cuda::wgmma::advance(cuda::wgmma::k_major(addr), step) == cuda::wgmma::k_major(addr + step);
  const bool mn_ok =
      cuda::wgmma::advance(cuda::wgmma::mn_major(addr, 8192), step) == cuda::wgmma::mn_major(addr + step, 8192);
  if (!k_ok || !mn_ok) atomicAdd(mismatches, 1ull);
}

TEST(Wgmma, SteppedDescriptorsEqualRebuiltOnes) {
  GPT_REQUIRE_CUDA_DEVICE();
  Tensor count = Tensor::empty({1}, DType::i64, Device::cuda);
  auto* mismatches = static_cast<unsigned long long*>(const_cast<void*>(count.raw()));
  // The attention kernels' steps: 32-byte k-steps, 2 KB row groups, 8 / 16 KB slabs and tiles, 48 KB Q tiles.
  for (const uint32_t step : {0u, 16u, 32u, 96u, 2048u, 8192u, 8224u, 16384u, 49152u, 131072u}) {
    GPT_CUDA_CHECK(cudaMemset(mismatches, 0, sizeof(unsigned long long)));
    descriptor_step_kernel<<<(1 << 14) / 256, 256>>>(step, mismatches);
    GPT_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(count.to_doubles()[0], 0.0) << "step " << step;
  }
}

}  // namespace
}  // namespace gpt
