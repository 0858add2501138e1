// CUDA kernels of kernels/dc_attention.h, version 1 (kernels/cuda/dc_attention_variants.h). Forward and backward pass 1
// run one block per query token (the head mixing couples all heads of a token): warps compute the H·n dot products of
// the local window, the block holds the window's probabilities in shared memory. Backward pass 2 runs one block per key
// token, so dk and dv have a single writer (no atomics, deterministic). Windows hold at most `keys` (112) tokens, so
// the keys and values are re-read from L2 by neighbouring blocks rather than staged in shared memory.
#include <algorithm>

#include "kernels/cuda/dc_attention_variants.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/dc_attention.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr size_t kMaxShared = 48 * 1024;

struct DcShape {
  int64_t tokens;
  int heads, dim;
  int64_t gate_stride, w1_lane, w2_lane;
  int keys;      // window length, at most tokens
  int segments;  // entries of cu_seqlens
};

// Segment [begin, end) of token t: the last cu_seqlens entry <= t and the entry after it.
__device__ __forceinline__ void find_segment(const int* cu, int entries, int64_t t, int64_t& begin, int64_t& end) {
  int lo = 0, hi = entries;  // first index with cu[index] > t, by binary search
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (cu[mid] <= t) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  begin = cu[lo - 1];
  end = lo < entries ? cu[lo] : t + 1;
}

// First key of query t's window: t's segment start, at most keys - 1 tokens back.
__device__ __forceinline__ int64_t window_first_key(const int* cu, const DcShape& s, int64_t t) {
  int64_t begin, end;
  find_segment(cu, s.segments, t, begin, end);
  return max(begin, t - s.keys + 1);
}

// Query t's first window key, found by thread 0 (which also runs `also`) and handed to the block through
// `lo_shared` after a barrier.
template <typename ThreadZeroWork>
__device__ __forceinline__ int64_t block_window_first_key(const int* cu, const DcShape& s, int64_t t,
                                                          int64_t& lo_shared, ThreadZeroWork also) {
  if (threadIdx.x == 0) {
    lo_shared = window_first_key(cu, s, t);
    also();
  }
  __syncthreads();
  return lo_shared;
}

// Last query whose window holds `key`: the key's segment end - 1, at most keys - 1 tokens on.
__device__ __forceinline__ int64_t window_last_query(const int* cu, const DcShape& s, int64_t key) {
  int64_t begin, end;
  find_segment(cu, s.segments, key, begin, end);
  return min(end - 1, key + s.keys - 1);
}

template <typename T, typename A>
__device__ __forceinline__ A warp_dot(const T* a, const T* b, int dim, int lane) {
  A s = 0;
  for (int d = lane; d < dim; d += 32) s += to_acc<A>(a[d]) * to_acc<A>(b[d]);
  return warp_sum(s);
}

// w1_h(t) = round(r_h·ρ) into w1[0..H); returns ρ. Serial over the heads (H is small), the CPU's order.
template <typename T, typename A>
__device__ A mixing_weights(const T* gates, const DcShape& s, int64_t t, A* w1) {
  const T* r = gates + t * s.gate_stride + s.w1_lane;
  A ss = 0;
  for (int h = 0; h < s.heads; ++h) ss += to_acc<A>(r[h]) * to_acc<A>(r[h]);
  const A rho = A(1) / sqrt(ss / A(s.heads) + A(kDcNormEps));
  for (int h = 0; h < s.heads; ++h) w1[h] = round_to<T>(to_acc<A>(r[h]) * rho);
  return rho;
}

template <typename T, typename A>
__global__ void dc_forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                  const int* __restrict__ cu, const T* __restrict__ gates, const T* y_core, T* y_out,
                                  A* __restrict__ lse, A tau, DcShape s) {
  extern __shared__ unsigned char shared_raw[];
  const int H = s.heads, D = s.dim;
  A* w1 = reinterpret_cast<A*>(shared_raw);  // [H]
  A* mx = w1 + H;                            // [H]
  A* sum = mx + H;                           // [H]
  A* logit = sum + H;                        // [H * keys]
  A* mix = logit + H * s.keys;               // [keys]
  __shared__ int64_t lo_shared;
  const int64_t t = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t lo = block_window_first_key(cu, s, t, lo_shared, [&] { mixing_weights<T, A>(gates, s, t, w1); });
  const int n = static_cast<int>(t - lo + 1);
  const int64_t row = static_cast<int64_t>(H) * D;
  for (int p = warp; p < H * n; p += kWarps) {
    const int h = p / n, i = p % n;
    const A dot = warp_dot<T, A>(q + t * row + h * D, k + (lo + i) * row + h * D, D, lane);
    if (lane == 0) logit[h * n + i] = tau * dot;
  }
  __syncthreads();
  for (int h = warp; h < H; h += kWarps) {
    A m = -INFINITY;
    for (int i = lane; i < n; i += 32) m = max(m, logit[h * n + i]);
    m = warp_max(m);
    A z = 0;
    for (int i = lane; i < n; i += 32) z += exp(logit[h * n + i] - m);
    z = warp_sum(z);
    if (lane == 0) {
      mx[h] = m;
      sum[h] = z;
      lse[h * s.tokens + t] = m + log(z);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    A a = 0;
    for (int h = 0; h < H; ++h) a += w1[h] * exp(logit[h * n + i] - mx[h]) / sum[h];
    mix[i] = a;
  }
  __syncthreads();
  for (int o = threadIdx.x; o < H * D; o += blockDim.x) {
    const int g = o / D;
    const A w2 = to_acc<A>(gates[t * s.gate_stride + s.w2_lane + g]);
    A acc = 0;
    for (int i = 0; i < n; ++i) acc += round_to<T>(w2 * mix[i]) * to_acc<A>(v[(lo + i) * row + o]);
    y_out[t * row + o] = from_acc<T>(to_acc<A>(y_core[t * row + o]) + acc);
  }
}

// Pass 1, one block per query token t: dq, both gate-lane gradients, and w1, dw1 saved for pass 2.
template <typename T, typename A>
__global__ void dc_backward_query_kernel(const T* __restrict__ dy_out, const T* __restrict__ q, const T* __restrict__ k,
                                         const T* __restrict__ v, const int* __restrict__ cu,
                                         const T* __restrict__ gates, const A* __restrict__ lse, T* __restrict__ dq,
                                         T* __restrict__ dgates, A* __restrict__ w1_all, A* __restrict__ dw1_all, A tau,
                                         DcShape s) {
  extern __shared__ unsigned char shared_raw[];
  const int H = s.heads, D = s.dim;
  A* w1 = reinterpret_cast<A*>(shared_raw);  // [H]
  A* dw1 = w1 + H;                           // [H]
  A* dw2 = dw1 + H;                          // [H]
  A* prob = dw2 + H;                         // [H * keys]
  A* dcg = prob + H * s.keys;                // [H * keys]
  A* mix = dcg + H * s.keys;                 // [keys]
  A* dmix = mix + s.keys;                    // [keys]
  __shared__ int64_t lo_shared;
  __shared__ A rho_shared;
  const int64_t t = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t lo =
      block_window_first_key(cu, s, t, lo_shared, [&] { rho_shared = mixing_weights<T, A>(gates, s, t, w1); });
  const int n = static_cast<int>(t - lo + 1);
  const int64_t row = static_cast<int64_t>(H) * D;
  for (int p = warp; p < H * n; p += kWarps) {
    const int h = p / n, i = p % n;
    const A qk = warp_dot<T, A>(q + t * row + h * D, k + (lo + i) * row + h * D, D, lane);
    const A gv = warp_dot<T, A>(dy_out + t * row + h * D, v + (lo + i) * row + h * D, D, lane);
    if (lane == 0) {
      prob[h * n + i] = exp(tau * qk - lse[h * s.tokens + t]);
      dcg[h * n + i] = gv;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    A a = 0, da = 0;
    for (int h = 0; h < H; ++h) {
      a += w1[h] * prob[h * n + i];
      da += to_acc<A>(gates[t * s.gate_stride + s.w2_lane + h]) * dcg[h * n + i];
    }
    mix[i] = a;
    dmix[i] = da;
  }
  __syncthreads();
  for (int h = warp; h < H; h += kWarps) {
    A sum_w2 = 0, sum_w1 = 0;
    for (int i = lane; i < n; i += 32) {
      sum_w2 += mix[i] * dcg[h * n + i];
      sum_w1 += prob[h * n + i] * dmix[i];
    }
    sum_w2 = warp_sum(sum_w2);
    sum_w1 = warp_sum(sum_w1);
    if (lane == 0) {
      dw2[h] = sum_w2;
      dw1[h] = sum_w1;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // Gate-lane gradients serially over the heads (the lanes of w1 and w2 may share columns).
    const T* r = gates + t * s.gate_stride + s.w1_lane;
    const A rho = rho_shared;
    A dw1_dot_r = 0;
    for (int h = 0; h < H; ++h) dw1_dot_r += dw1[h] * to_acc<A>(r[h]);
    for (int h = 0; h < H; ++h) {
      const A dr = rho * dw1[h] - to_acc<A>(r[h]) * rho * rho * rho * dw1_dot_r / A(H);
      T& g1 = dgates[t * s.gate_stride + s.w1_lane + h];
      g1 = from_acc<T>(to_acc<A>(g1) + dr);
      T& g2 = dgates[t * s.gate_stride + s.w2_lane + h];
      g2 = from_acc<T>(to_acc<A>(g2) + dw2[h]);
      w1_all[t * H + h] = w1[h];
      dw1_all[t * H + h] = dw1[h];
    }
  }
  for (int o = threadIdx.x; o < H * D; o += blockDim.x) {
    const int h = o / D;
    A acc = 0;
    for (int i = 0; i < n; ++i) {
      const A dlogit = prob[h * n + i] * w1[h] * (dmix[i] - dw1[h]);
      acc += dlogit * to_acc<A>(k[(lo + i) * row + o]);
    }
    dq[t * row + o] = from_acc<T>(to_acc<A>(dq[t * row + o]) + tau * acc);
  }
}

// Pass 2, one block per key token s: dk and dv over the queries whose window holds s.
template <typename T, typename A>
__global__ void dc_backward_key_kernel(const T* __restrict__ dy_out, const T* __restrict__ q, const T* __restrict__ k,
                                       const T* __restrict__ v, const int* __restrict__ cu, const T* __restrict__ gates,
                                       const A* __restrict__ lse, const A* __restrict__ w1_all,
                                       const A* __restrict__ dw1_all, T* __restrict__ dk, T* __restrict__ dv, A tau,
                                       DcShape s) {
  extern __shared__ unsigned char shared_raw[];
  const int H = s.heads, D = s.dim;
  A* dlogit = reinterpret_cast<A*>(shared_raw);  // [H * keys]: π first, then dlogit
  A* weight = dlogit + H * s.keys;               // [H * keys]: dc first, then c = round(w2·a)
  __shared__ int64_t hi_shared;
  const int64_t key = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) hi_shared = window_last_query(cu, s, key);
  __syncthreads();
  const int m = static_cast<int>(hi_shared - key + 1);
  const int64_t row = static_cast<int64_t>(H) * D;
  for (int p = warp; p < H * m; p += kWarps) {
    const int h = p / m, i = p % m;
    const int64_t t = key + i;
    const A qk = warp_dot<T, A>(q + t * row + h * D, k + key * row + h * D, D, lane);
    const A gv = warp_dot<T, A>(dy_out + t * row + h * D, v + key * row + h * D, D, lane);
    if (lane == 0) {
      dlogit[h * m + i] = exp(tau * qk - lse[h * s.tokens + t]);
      weight[h * m + i] = gv;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < m; i += blockDim.x) {
    const int64_t t = key + i;
    const T* w2 = gates + t * s.gate_stride + s.w2_lane;
    A a = 0, da = 0;
    for (int h = 0; h < H; ++h) {
      a += w1_all[t * H + h] * dlogit[h * m + i];
      da += to_acc<A>(w2[h]) * weight[h * m + i];
    }
    for (int h = 0; h < H; ++h) {
      dlogit[h * m + i] = dlogit[h * m + i] * w1_all[t * H + h] * (da - dw1_all[t * H + h]);
      weight[h * m + i] = round_to<T>(to_acc<A>(w2[h]) * a);
    }
  }
  __syncthreads();
  for (int o = threadIdx.x; o < H * D; o += blockDim.x) {
    const int h = o / D;
    A acc_k = 0, acc_v = 0;
    for (int i = 0; i < m; ++i) {
      const int64_t t = key + i;
      acc_k += dlogit[h * m + i] * to_acc<A>(q[t * row + o]);
      acc_v += weight[h * m + i] * to_acc<A>(dy_out[t * row + o]);
    }
    dk[key * row + o] = from_acc<T>(to_acc<A>(dk[key * row + o]) + tau * acc_k);
    dv[key * row + o] = from_acc<T>(to_acc<A>(dv[key * row + o]) + acc_v);
  }
}

DcShape dc_shape(const Tensor& q, const Tensor& cu_seqlens, const Tensor& gates, DcLanes lanes, int64_t keys,
                 const char* op) {
  const int64_t tokens = q.size(0);
  GPT_CHECK(tokens <= 0x7fffffff, op, ": too many tokens for one CUDA grid: ", tokens);
  GPT_CHECK(cu_seqlens.size(0) <= 0x7fffffff, op, ": cu_seqlens too long: ", cu_seqlens.describe());
  const int64_t window = std::min(keys, tokens);
  return {tokens,   static_cast<int>(q.size(1)), static_cast<int>(q.size(2)),         gates.size(1), lanes.w1,
          lanes.w2, static_cast<int>(window),    static_cast<int>(cu_seqlens.size(0))};
}

size_t checked_shared(size_t values, size_t value_bytes, const DcShape& s, const char* op) {
  const size_t bytes = values * value_bytes;
  GPT_CHECK(bytes <= kMaxShared, op, ": a window of ", s.keys, " keys × ", s.heads, " heads needs ", bytes,
            " bytes of shared memory, the CUDA kernel allows ", kMaxShared, " (use fewer keys)");
  return bytes;
}

}  // namespace

void dc_attention_forward_v1(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                             const Tensor& gates, DcLanes lanes, const Tensor& y_core, Tensor& y_out, Tensor& lse,
                             float scale, int64_t keys) {
  const char* op = "dc_attention_forward";
  const DcShape s = dc_shape(q, cu_seqlens, gates, lanes, keys, op);
  if (s.tokens == 0) return;
  dispatch_floating_cuda(q.dtype(), op, [&]<typename T, typename A>() {
    const size_t shared =
        checked_shared(3 * static_cast<size_t>(s.heads) + static_cast<size_t>(s.heads + 1) * s.keys, sizeof(A), s, op);
    dc_forward_kernel<T, A><<<static_cast<unsigned>(s.tokens), kThreads, shared, op_stream()>>>(
        device_ptr<T>(q), device_ptr<T>(k), device_ptr<T>(v), device_ptr<int>(cu_seqlens), device_ptr<T>(gates),
        device_ptr<T>(y_core), device_ptr<T>(y_out), device_ptr<A>(lse), static_cast<A>(scale), s);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void dc_attention_backward_v1(const Tensor& dy_out, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& cu_seqlens, const Tensor& gates, DcLanes lanes, const Tensor& lse,
                              Tensor& dq, Tensor& dk, Tensor& dv, Tensor& dgates, float scale, int64_t keys) {
  const char* op = "dc_attention_backward";
  const DcShape s = dc_shape(q, cu_seqlens, gates, lanes, keys, op);
  if (s.tokens == 0) return;
  dispatch_floating_cuda(q.dtype(), op, [&]<typename T, typename A>() {
    const size_t H = static_cast<size_t>(s.heads), W = static_cast<size_t>(s.keys);
    const size_t query_shared = checked_shared(3 * H + 2 * H * W + 2 * W, sizeof(A), s, op);
    const size_t key_shared = checked_shared(2 * H * W, sizeof(A), s, op);
    DeviceScratch w1_all(sizeof(A) * s.tokens * H), dw1_all(sizeof(A) * s.tokens * H);
    const unsigned blocks = static_cast<unsigned>(s.tokens);
    dc_backward_query_kernel<T, A><<<blocks, kThreads, query_shared, op_stream()>>>(
        device_ptr<T>(dy_out), device_ptr<T>(q), device_ptr<T>(k), device_ptr<T>(v), device_ptr<int>(cu_seqlens),
        device_ptr<T>(gates), device_ptr<A>(lse), device_ptr<T>(dq), device_ptr<T>(dgates), w1_all.as<A>(),
        dw1_all.as<A>(), static_cast<A>(scale), s);
    GPT_CUDA_CHECK_LAUNCH();
    dc_backward_key_kernel<T, A><<<blocks, kThreads, key_shared, op_stream()>>>(
        device_ptr<T>(dy_out), device_ptr<T>(q), device_ptr<T>(k), device_ptr<T>(v), device_ptr<int>(cu_seqlens),
        device_ptr<T>(gates), device_ptr<A>(lse), w1_all.as<A>(), dw1_all.as<A>(), device_ptr<T>(dk), device_ptr<T>(dv),
        static_cast<A>(scale), s);
    GPT_CUDA_CHECK_LAUNCH();
  });
}

void dc_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                          const Tensor& gates, DcLanes lanes, const Tensor& y_core, Tensor& y_out, Tensor& lse,
                          float scale, int64_t keys) {
  if (dc_attention_v2_supports(q, gates, keys)) {
    dc_attention_forward_v2(q, k, v, cu_seqlens, gates, lanes, y_core, y_out, lse, scale, keys);
  } else {
    dc_attention_forward_v1(q, k, v, cu_seqlens, gates, lanes, y_core, y_out, lse, scale, keys);
  }
}

void dc_attention_backward(const Tensor& dy_out, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& cu_seqlens, const Tensor& gates, DcLanes lanes, const Tensor& lse, Tensor& dq,
                           Tensor& dk, Tensor& dv, Tensor& dgates, float scale, int64_t keys) {
  if (dc_attention_v2_supports(q, gates, keys)) {
    dc_attention_backward_v2(dy_out, q, k, v, cu_seqlens, gates, lanes, lse, dq, dk, dv, dgates, scale, keys);
  } else {
    dc_attention_backward_v1(dy_out, q, k, v, cu_seqlens, gates, lanes, lse, dq, dk, dv, dgates, scale, keys);
  }
}

}  // namespace gpt::cuda
