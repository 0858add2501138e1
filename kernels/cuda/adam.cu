// CUDA kernel of kernels/adam.h: one pass over param, grad, m and v (memory bound), 4 elements per thread
// when every pointer allows packed access. The element math repeats the CPU reference's rounding sequence
// (no FMA contraction), so results match it bit for bit where the CPU build does not contract either.
#include "kernels/adam.h"
#include "kernels/cuda/device_utils.cuh"

namespace gpt::cuda {

namespace {

template <typename A>
struct AdamScalars {
  A b1, b2, one_b1, one_b2, eps, step, decay;
};

template <typename T, typename A>
__device__ __forceinline__ void adam_element(T& p, T g, A& m, A& v, const AdamScalars<A>& c) {
  const A gi = to_acc<A>(g);
  const A mi = add_rn(mul_rn(c.b1, m), mul_rn(c.one_b1, gi));
  const A vi = add_rn(mul_rn(c.b2, v), mul_rn(mul_rn(c.one_b2, gi), gi));
  m = mi;
  v = vi;
  const A pi = to_acc<A>(p);
  A u = mul_rn(div_rn(mi, add_rn(sqrt_rn(vi), c.eps)), c.step);
  if (mul_rn(u, pi) > A(0)) u = add_rn(u, mul_rn(c.decay, pi));  // cautious decay
  p = from_acc<T>(sub_rn(pi, u));
}

template <typename T, typename A, int N>
__global__ void adam_kernel(T* __restrict__ p, const T* __restrict__ g, A* __restrict__ m, A* __restrict__ v,
                            int64_t packs, AdamScalars<A> c) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    Pack<T, N> pp = load_pack<T, N>(p + i * N);
    const Pack<T, N> gp = load_pack<T, N>(g + i * N);
    Pack<A, N> mp = load_pack<A, N>(m + i * N);
    Pack<A, N> vp = load_pack<A, N>(v + i * N);
#pragma unroll
    for (int j = 0; j < N; ++j) adam_element(pp.v[j], gp.v[j], mp.v[j], vp.v[j], c);
    store_pack<T, N>(p + i * N, pp);
    store_pack<A, N>(m + i * N, mp);
    store_pack<A, N>(v + i * N, vp);
  }
}

constexpr int kThreads = 256;
constexpr int kPack = 4;

template <typename T, typename A, int N>
void launch_adam(T* p, const T* g, A* m, A* v, int64_t packs, const AdamScalars<A>& c) {
  if (packs == 0) return;
  adam_kernel<T, A, N><<<grid_stride_blocks(packs, kThreads), kThreads, 0, op_stream()>>>(p, g, m, v, packs, c);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamCoefficients& c) {
  const int64_t n = param.numel();
  dispatch_floating_cuda(param.dtype(), "adam_update", [&]<typename T, typename A>() {
    const AdamScalars<A> s{static_cast<A>(c.beta1),       static_cast<A>(c.beta2), static_cast<A>(1.0 - c.beta1),
                           static_cast<A>(1.0 - c.beta2), static_cast<A>(c.eps),   static_cast<A>(c.step_size),
                           static_cast<A>(c.decay)};
    T* pp = device_ptr<T>(param);
    const T* gp = device_ptr<T>(grad);
    A* mp = device_ptr<A>(m);
    A* vp = device_ptr<A>(v);
    const bool packed = aligned_to(pp, sizeof(T) * kPack) && aligned_to(gp, sizeof(T) * kPack) &&
                        aligned_to(mp, sizeof(A) * kPack) && aligned_to(vp, sizeof(A) * kPack);
    const int64_t head = packed ? n / kPack * kPack : 0;
    if (head > 0) launch_adam<T, A, kPack>(pp, gp, mp, vp, head / kPack, s);
    launch_adam<T, A, 1>(pp + head, gp + head, mp + head, vp + head, n - head, s);
  });
}

}  // namespace gpt::cuda
