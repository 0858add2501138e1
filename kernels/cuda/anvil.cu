// CUDA kernels of kernels/anvil.h (RECIPE §S.8): the momentum of the two rails, the scaling by the Gram trace, and
// the update (the equalizer and cautious update NorMuon's kernels run, gated by the slow rail:
// kernels/cuda/normuon_apply.h). The products go through gemm. Element math repeats the CPU reference's rounding
// sequence (no FMA contraction), so momentum and trace scaling match it bit for bit; the trace is summed serially in
// double in the CPU's order, so it matches too. Only the update's statistics (row/column means) are summed in a
// different, fixed order (kernels/cuda/normuon.cu).
#include <algorithm>
#include <cmath>

#include "kernels/anvil.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/normuon_apply.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPack = 4;

template <typename A>
struct RailScalars {
  A fast_beta, one_fast_beta, slow_beta, one_slow_beta, weight, one_weight, mu, one_mu;
};

// v_f ← β_f·v_f + (1−β_f)·G;  v_s ← β_s·v_s + (1−β_s)·G;  X = W((1−μ)·G + μ·(w·v_f + (1−w)·v_s)).
template <typename T, typename A, int N>
__global__ void momentum_kernel(const T* __restrict__ g, A* __restrict__ vf, A* __restrict__ vs, T* __restrict__ x,
                                int64_t packs, RailScalars<A> c) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    const Pack<T, N> gp = load_pack<T, N>(g + i * N);
    Pack<A, N> fp = load_pack<A, N>(vf + i * N);
    Pack<A, N> sp = load_pack<A, N>(vs + i * N);
    Pack<T, N> xp;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const A gi = to_acc<A>(gp.v[j]);
      const A f = add_rn(mul_rn(c.fast_beta, fp.v[j]), mul_rn(c.one_fast_beta, gi));
      const A s = add_rn(mul_rn(c.slow_beta, sp.v[j]), mul_rn(c.one_slow_beta, gi));
      fp.v[j] = f;
      sp.v[j] = s;
      const A blend = add_rn(mul_rn(c.weight, f), mul_rn(c.one_weight, s));
      xp.v[j] = from_acc<T>(add_rn(mul_rn(c.one_mu, gi), mul_rn(c.mu, blend)));
    }
    store_pack<A, N>(vf + i * N, fp);
    store_pack<A, N>(vs + i * N, sp);
    store_pack<T, N>(x + i * N, xp);
  }
}

template <typename T, typename A, int N>
void launch_momentum(const T* g, A* vf, A* vs, T* x, int64_t packs, const RailScalars<A>& c) {
  if (packs == 0) return;
  momentum_kernel<T, A, N><<<grid_stride_blocks(packs, kThreads), kThreads, 0, op_stream()>>>(g, vf, vs, x, packs, c);
  GPT_CUDA_CHECK_LAUNCH();
}

// δ and W(δ²) of matrix blockIdx.x into deltas[2m], deltas[2m + 1]: t = W(Σ_i A_ii) summed serially in double in
// the CPU's order (the block stages the diagonal in shared memory so one thread's serial sum waits on no loads),
// √ correctly rounded, δ = W(W(W(√t)·1.05) + 1e-6).
template <typename T, typename A>
__global__ void trace_delta_kernel(const T* __restrict__ gram, int64_t k, A* __restrict__ deltas) {
  __shared__ double diagonal[kThreads];
  const int64_t m = blockIdx.x;
  const T* am = gram + m * k * k;
  double trace = 0;
  for (int64_t base = 0; base < k; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    if (i < k) diagonal[threadIdx.x] = static_cast<double>(to_acc<A>(am[i * k + i]));
    __syncthreads();
    if (threadIdx.x == 0) {
      const int64_t n = k - base < kThreads ? k - base : kThreads;
      for (int64_t j = 0; j < n; ++j) trace = __dadd_rn(trace, diagonal[j]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const A t = round_to<T>(static_cast<A>(trace));
    const A root = round_to<T>(sqrt_rn(t));
    const A delta = round_to<T>(add_rn(round_to<T>(mul_rn(root, static_cast<A>(kAnvilTraceMargin))), A(1e-6)));
    deltas[2 * m] = delta;
    deltas[2 * m + 1] = round_to<T>(mul_rn(delta, delta));
  }
}

// X ← W(X/δ) and A ← W(A/W(δ²)) for matrix blockIdx.y; blocks blockIdx.x stride over its elements.
template <typename T, typename A>
__global__ void scale_by_delta_kernel(T* __restrict__ x, T* __restrict__ gram, int64_t per, int64_t k,
                                      const A* __restrict__ deltas) {
  const int64_t m = blockIdx.y;
  const A delta = deltas[2 * m], delta_sq = deltas[2 * m + 1];
  T* xm = x + m * per;
  T* am = gram + m * k * k;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first; i < per; i += stride) xm[i] = from_acc<T>(div_rn(to_acc<A>(xm[i]), delta));
  for (int64_t i = first; i < k * k; i += stride) am[i] = from_acc<T>(div_rn(to_acc<A>(am[i]), delta_sq));
}

}  // namespace

void anvil_momentum(const Tensor& grad, Tensor& fast_rail, Tensor& slow_rail, Tensor& x, const AnvilRails& rails) {
  const int64_t n = grad.numel();
  dispatch_floating_cuda(grad.dtype(), "anvil_momentum", [&]<typename T, typename A>() {
    const T* gp = device_ptr<T>(grad);
    A* vf = device_ptr<A>(fast_rail);
    A* vs = device_ptr<A>(slow_rail);
    T* xp = device_ptr<T>(x);
    // The scalars of the CPU reference, rounded to A from the same doubles.
    const RailScalars<A> c{static_cast<A>(rails.fast_beta),   static_cast<A>(1.0 - rails.fast_beta),
                           static_cast<A>(kAnvilSlowBeta),    static_cast<A>(1.0 - kAnvilSlowBeta),
                           static_cast<A>(rails.fast_weight), static_cast<A>(1.0 - rails.fast_weight),
                           static_cast<A>(rails.rail),        static_cast<A>(1.0 - rails.rail)};
    const bool packed = aligned_to(gp, sizeof(T) * kPack) && aligned_to(vf, sizeof(A) * kPack) &&
                        aligned_to(vs, sizeof(A) * kPack) && aligned_to(xp, sizeof(T) * kPack);
    const int64_t head = packed ? n / kPack * kPack : 0;
    if (head > 0) launch_momentum<T, A, kPack>(gp, vf, vs, xp, head / kPack, c);
    launch_momentum<T, A, 1>(gp + head, vf + head, vs + head, xp + head, n - head, c);
  });
}

void anvil_scale_by_trace(Tensor& x, Tensor& gram) {
  const int64_t count = x.size(0), per = x.size(1) * x.size(2), k = gram.size(1);
  if (count == 0) return;
  GPT_CHECK(count <= 65535, "anvil_gram_normalize: at most 65535 matrices per stack on CUDA, got ", count);
  const int64_t work = std::max(per, k * k);
  const unsigned blocks_per_matrix = std::max(
      1u,
      std::min(blocks_for(work, kThreads), grid_stride_blocks(work * count, kThreads) / static_cast<unsigned>(count)));
  dispatch_floating_cuda(x.dtype(), "anvil_gram_normalize", [&]<typename T, typename A>() {
    DeviceScratch deltas(sizeof(A) * 2 * static_cast<size_t>(count));
    T* xp = device_ptr<T>(x);
    T* ap = device_ptr<T>(gram);
    trace_delta_kernel<T, A><<<static_cast<unsigned>(count), kThreads, 0, op_stream()>>>(ap, k, deltas.as<A>());
    GPT_CUDA_CHECK_LAUNCH();
    const dim3 grid(blocks_per_matrix, static_cast<unsigned>(count));
    scale_by_delta_kernel<T, A><<<grid, kThreads, 0, op_stream()>>>(xp, ap, per, k, deltas.as<A>());
    GPT_CUDA_CHECK_LAUNCH();
  });
}

void anvil_apply(const Tensor& x, Tensor& second_moment, const Tensor& slow_rail, Tensor& param, Tensor& mantissa,
                 const AnvilArgs& args) {
  equalize_and_update(x, second_moment, param, mantissa, anvil_equalizer_args(args), &slow_rail);
}

}  // namespace gpt::cuda
