// CUDA kernels of kernels/value_gate.h. Forward: one warp per (token, head) row. Backward: one block per
// token (its heads share the 6 gate-input lanes of u and ve), writing dz[t, h] for a second kernel that
// reduces dgate over all tokens in a fixed order (deterministic, no atomics).
#include "kernels/cuda/device_utils.cuh"
#include "kernels/value_gate.h"

namespace gpt::cuda {

namespace {

constexpr int kL = static_cast<int>(kValueGateLanes);
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

template <typename T, typename A>
__device__ __forceinline__ A gate_logit(const T* gate_row, const T* u_row, const T* ve_row) {
  A z = 0;
#pragma unroll
  for (int j = 0; j < kL; ++j) {
    z += to_acc<A>(gate_row[j]) * to_acc<A>(u_row[j]) + to_acc<A>(gate_row[kL + j]) * to_acc<A>(ve_row[j]);
  }
  return z;
}

template <typename A>
__device__ __forceinline__ A sigmoid(A z) {
  return A(1) / (A(1) + exp(-z));
}

template <typename T, typename A>
__global__ void value_gate_forward_kernel(const T* v, const T* __restrict__ u, const T* __restrict__ ve,
                                          const T* __restrict__ gate, T* v_out, int64_t rows, int heads, int dim,
                                          int64_t u_stride) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t t = row / heads, h = row % heads, base = row * dim;
  const A g = A(2) * sigmoid(gate_logit<T, A>(gate + h * 2 * kL, u + t * u_stride, ve + t * heads * dim));
  for (int d = lane; d < dim; d += 32)
    v_out[base + d] = from_acc<T>(to_acc<A>(v[base + d]) + g * to_acc<A>(ve[base + d]));
}

// One block per token t. Shared: dz and 2σ per head.
template <typename T, typename A>
__global__ void value_gate_backward_kernel(const T* __restrict__ dv_out, const T* __restrict__ u,
                                           const T* __restrict__ ve, const T* __restrict__ gate, T* __restrict__ dv,
                                           T* __restrict__ du, T* __restrict__ dve, A* __restrict__ dz_all, int heads,
                                           int dim, int64_t u_stride, bool add_dv, bool add_dve) {
  extern __shared__ unsigned char shared_raw[];
  A* dz = reinterpret_cast<A*>(shared_raw);  // [heads]
  A* two_s = dz + heads;                     // [heads]
  const int64_t t = blockIdx.x, token_base = t * heads * dim;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int h = warp; h < heads; h += kWarps) {
    const T* gate_row = gate + h * 2 * kL;
    const A s = sigmoid(gate_logit<T, A>(gate_row, u + t * u_stride, ve + token_base));
    const int64_t base = token_base + static_cast<int64_t>(h) * dim;
    A dot = 0;
    for (int d = lane; d < dim; d += 32) {
      const A g_out = to_acc<A>(dv_out[base + d]);
      dot += g_out * to_acc<A>(ve[base + d]);
      dv[base + d] = from_acc<T>((add_dv ? to_acc<A>(dv[base + d]) : A(0)) + g_out);
      // The token's first kL ve values also feed the gate: added once below, with their gate terms.
      if (h * dim + d >= kL) {
        dve[base + d] = from_acc<T>((add_dve ? to_acc<A>(dve[base + d]) : A(0)) + A(2) * s * g_out);
      }
    }
    dot = warp_sum(dot);
    if (lane == 0) {
      const A dzh = dot * A(2) * s * (A(1) - s);
      dz[h] = dzh;
      two_s[h] = A(2) * s;
      dz_all[t * heads + h] = dzh;
    }
  }
  __syncthreads();
  if (threadIdx.x < kL) {
    const int j = threadIdx.x;
    A du_lane = 0, dve_lane = 0;
    for (int h = 0; h < heads; ++h) {
      du_lane += dz[h] * to_acc<A>(gate[h * 2 * kL + j]);
      dve_lane += dz[h] * to_acc<A>(gate[h * 2 * kL + kL + j]);
    }
    if (j < heads * dim) dve_lane += two_s[j / dim] * to_acc<A>(dv_out[token_base + j]);
    du[t * u_stride + j] = from_acc<T>(to_acc<A>(du[t * u_stride + j]) + du_lane);
    if (j < heads * dim) {
      dve[token_base + j] = from_acc<T>((add_dve ? to_acc<A>(dve[token_base + j]) : A(0)) + dve_lane);
    }
  }
}

// dgate[h, j] += Σ_t dz[t, h]·f_t[j]: one block per (h, j), a fixed-order block sum.
template <typename T, typename A>
__global__ void value_gate_dgate_kernel(const A* __restrict__ dz_all, const T* __restrict__ u, const T* __restrict__ ve,
                                        T* __restrict__ dgate, int64_t tokens, int heads, int dim, int64_t u_stride) {
  __shared__ A scratch[32];
  const int h = blockIdx.x / (2 * kL), j = blockIdx.x % (2 * kL);
  A sum = 0;
  for (int64_t t = threadIdx.x; t < tokens; t += blockDim.x) {
    const A f = j < kL ? to_acc<A>(u[t * u_stride + j]) : to_acc<A>(ve[t * heads * dim + (j - kL)]);
    sum += dz_all[t * heads + h] * f;
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) dgate[blockIdx.x] = from_acc<T>(to_acc<A>(dgate[blockIdx.x]) + sum);
}

}  // namespace

void value_gate_forward(const Tensor& v, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& v_out) {
  const int64_t rows = v.size(0) * v.size(1);
  if (rows == 0) return;
  dispatch_floating_cuda(v.dtype(), "value_gate_forward", [&]<typename T, typename A>() {
    value_gate_forward_kernel<T, A><<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, 0, op_stream()>>>(
        device_ptr<T>(v), device_ptr<T>(u), device_ptr<T>(ve), device_ptr<T>(gate), device_ptr<T>(v_out), rows,
        static_cast<int>(v.size(1)), static_cast<int>(v.size(2)), u.size(1));
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void value_gate_backward(const Tensor& dv_out, const Tensor& u, const Tensor& ve, const Tensor& gate, Tensor& dv,
                         Tensor& du, Tensor& dve, Tensor& dgate, GradWrite write_dv, GradWrite write_dve) {
  const int64_t tokens = dv_out.size(0);
  const int heads = static_cast<int>(dv_out.size(1)), dim = static_cast<int>(dv_out.size(2));
  if (tokens == 0 || heads == 0) return;
  GPT_CHECK(tokens <= 0x7fffffff, "value_gate_backward: too many tokens for one CUDA grid: ", tokens);
  dispatch_floating_cuda(dv_out.dtype(), "value_gate_backward", [&]<typename T, typename A>() {
    DeviceScratch dz(sizeof(A) * tokens * heads);
    const size_t shared = 2 * sizeof(A) * heads;
    value_gate_backward_kernel<T, A><<<static_cast<unsigned>(tokens), kThreads, shared, op_stream()>>>(
        device_ptr<T>(dv_out), device_ptr<T>(u), device_ptr<T>(ve), device_ptr<T>(gate), device_ptr<T>(dv),
        device_ptr<T>(du), device_ptr<T>(dve), dz.as<A>(), heads, dim, u.size(1), write_dv == GradWrite::add,
        write_dve == GradWrite::add);
    GPT_CUDA_CHECK_LAUNCH();
    value_gate_dgate_kernel<T, A><<<static_cast<unsigned>(heads * 2 * kL), 256, 0, op_stream()>>>(
        dz.as<A>(), device_ptr<T>(u), device_ptr<T>(ve), device_ptr<T>(dgate), tokens, heads, dim, u.size(1));
    GPT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpt::cuda
