// CUDA kernels of the elementwise and per-matrix NorMuon steps (kernels/normuon.h; the update also serves ANVIL,
// kernels/cuda/normuon_apply.h); Polar Express runs through gemm. Element math repeats the CPU reference's rounding
// sequence (no FMA contraction), so the momentum step and the update/truncation step match it bit for bit given the
// same statistics; the reductions (norms, row/column means) are summed in a fixed tree order, deterministic run to
// run.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/normuon_apply.h"
#include "kernels/normuon.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPack = 4;

// ---- 1. momentum (Nesterov) ----

template <typename T, typename A, int N>
__global__ void momentum_kernel(const T* __restrict__ g, A* __restrict__ m, T* __restrict__ x, int64_t packs, A mu,
                                A one_mu) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    const Pack<T, N> gp = load_pack<T, N>(g + i * N);
    Pack<A, N> mp = load_pack<A, N>(m + i * N);
    Pack<T, N> xp;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const A gi = to_acc<A>(gp.v[j]);
      const A mi = add_rn(mul_rn(mu, mp.v[j]), mul_rn(one_mu, gi));
      mp.v[j] = mi;
      xp.v[j] = from_acc<T>(add_rn(mul_rn(one_mu, gi), mul_rn(mu, mi)));
    }
    store_pack<A, N>(m + i * N, mp);
    store_pack<T, N>(x + i * N, xp);
  }
}

template <typename T, typename A, int N>
void launch_momentum(const T* g, A* m, T* x, int64_t packs, A mu, A one_mu) {
  if (packs == 0) return;
  momentum_kernel<T, A, N>
      <<<grid_stride_blocks(packs, kThreads), kThreads, 0, op_stream()>>>(g, m, x, packs, mu, one_mu);
  GPT_CUDA_CHECK_LAUNCH();
}

// ---- 2. normalization by the Frobenius norm ----
// Pass 1: block (c, k) sums the squares of chunk c of matrix k into partial[k, c]. Pass 2: every block of
// matrix k adds the partials in chunk order (same total in each block) and scales its own chunk.

template <typename T, typename A>
__global__ void square_sum_kernel(const T* __restrict__ x, A* __restrict__ partial, int64_t per, int64_t chunk) {
  __shared__ A scratch[32];
  const int64_t k = blockIdx.y, begin = blockIdx.x * chunk, end = min(per, begin + chunk);
  const T* xm = x + k * per;
  A ss = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const A v = to_acc<A>(xm[i]);
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  if (threadIdx.x == 0) partial[k * gridDim.x + blockIdx.x] = ss;
}

template <typename T, typename A>
__global__ void scale_by_norm_kernel(T* __restrict__ x, const A* __restrict__ partial, int64_t per, int64_t chunk) {
  __shared__ A denom_shared;
  const int64_t k = blockIdx.y, begin = blockIdx.x * chunk, end = min(per, begin + chunk);
  if (threadIdx.x == 0) {
    A ss = 0;
    for (unsigned c = 0; c < gridDim.x; ++c) ss += partial[k * gridDim.x + c];
    const A norm = round_to<T>(sqrt_rn(ss));
    denom_shared = round_to<T>(add_rn(round_to<T>(mul_rn(norm, A(1.02))), A(1e-6)));
  }
  __syncthreads();
  const A denom = denom_shared;
  T* xm = x + k * per;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) xm[i] = from_acc<T>(div_rn(to_acc<A>(xm[i]), denom));
}

// ---- 3. variance reduction statistics and the update ----

// r_i = mean_j X_ij² for every row i (one warp per row), into r[k, i].
template <typename T, typename A>
__global__ void row_mean_square_kernel(const T* __restrict__ x, A* __restrict__ r, int64_t total_rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= total_rows) return;
  const T* xr = x + row * cols;
  const A ss = warp_row_sum_squares<A>(xr, cols, lane);
  if (lane == 0) r[row] = div_rn(ss, static_cast<A>(cols));
}

// r_j = mean_i X_ij² for every column j (one thread per column, rows in order: the CPU's summation order).
template <typename T, typename A>
__global__ void column_mean_square_kernel(const T* __restrict__ x, A* __restrict__ r, int64_t rows, int64_t cols) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, k = blockIdx.y;
  if (j >= cols) return;
  const T* xm = x + k * rows * cols;
  A ss = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const A v = to_acc<A>(xm[i * cols + j]);
    ss = add_rn(ss, mul_rn(v, v));
  }
  r[k * cols + j] = div_rn(ss, static_cast<A>(rows));
}

// One block per matrix: S ← β2·S + (1−β2)·r, g = 1/sqrt(max(S, 1e-10)), then g ← W(g·ν/max(ν', 1e-10)),
// written over r.
template <typename T, typename A>
__global__ void second_moment_kernel(A* __restrict__ r_then_g, A* __restrict__ s, int64_t stats, A q, A beta2,
                                     A one_beta2) {
  __shared__ A scratch[32];
  const int64_t k = blockIdx.x;
  A* rg = r_then_g + k * stats;
  A* sk = s + k * stats;
  A sum_r = 0, sum_rg2 = 0;
  for (int64_t t = threadIdx.x; t < stats; t += blockDim.x) {
    const A rt = rg[t];
    const A st = add_rn(mul_rn(beta2, sk[t]), mul_rn(one_beta2, rt));
    sk[t] = st;
    const A gt = div_rn(A(1), sqrt_rn(max(st, A(1e-10))));
    rg[t] = gt;
    sum_r += rt;
    sum_rg2 += mul_rn(mul_rn(rt, gt), gt);
  }
  sum_r = block_sum(sum_r, scratch);
  sum_rg2 = block_sum(sum_rg2, scratch);
  const A nu = sqrt_rn(mul_rn(q, sum_r));
  const A nu_new = sqrt_rn(mul_rn(q, sum_rg2));
  const A ratio = div_rn(nu, max(nu_new, A(1e-10)));
  for (int64_t t = threadIdx.x; t < stats; t += blockDim.x) rg[t] = round_to<T>(mul_rn(rg[t], ratio));
}

template <typename A>
struct ApplyScalars {
  A lr_eff[2];  // by global matrix parity
  A decay[2];
  int64_t first_matrix;
};

// P ← P − [U⊙P ≥ 0]·P·decay − U·lr_eff with U = W(X ⊙ g); bf16 params through the fp32 master
// (weight = upper 16 bits, mantissa = lower 16 bits, stored back by truncation). kGated: the decay gate is
// `gate` (ANVIL's slow rail, RECIPE §S.8) instead of U.
template <typename T, typename A, int N, bool kGated>
__global__ void apply_kernel(const T* __restrict__ x, const A* __restrict__ g, const A* __restrict__ gate,
                             T* __restrict__ p, uint16_t* __restrict__ mantissa, int64_t packs, int64_t rows,
                             int64_t cols, bool per_row, ApplyScalars<A> c) {
  constexpr bool kMaster = std::is_same_v<T, __nv_bfloat16>;
  const int64_t stats = per_row ? rows : cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += stride) {
    const int64_t e0 = i * N;  // first flat element; a pack never crosses a row (cols % N == 0)
    const int64_t k = e0 / (rows * cols), within = e0 % (rows * cols), row = within / cols, col = within % cols;
    const int parity = static_cast<int>((c.first_matrix + k) % 2);
    const A lr_eff = c.lr_eff[parity], decay = c.decay[parity];
    const A* gk = g + k * stats;
    const Pack<T, N> xp = load_pack<T, N>(x + i * N);
    Pack<T, N> pp = load_pack<T, N>(p + i * N);
    Pack<uint16_t, N> mp{};
    if constexpr (kMaster) mp = load_pack<uint16_t, N>(mantissa + i * N);
    Pack<A, N> gate_pack{};
    if constexpr (kGated) gate_pack = load_pack<A, N>(gate + i * N);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const A u = round_to<T>(mul_rn(to_acc<A>(xp.v[j]), gk[per_row ? row : col + j]));
      A pv;
      if constexpr (kMaster) {
        pv = __uint_as_float((static_cast<uint32_t>(__bfloat16_as_ushort(pp.v[j])) << 16) | mp.v[j]);
      } else {
        pv = pp.v[j];
      }
      const A decider = kGated ? gate_pack.v[j] : u;
      const A decayed = mul_rn(decider, pv) >= A(0) ? sub_rn(pv, mul_rn(pv, decay)) : pv;
      const A updated = sub_rn(decayed, mul_rn(u, lr_eff));
      if constexpr (kMaster) {
        const uint32_t bits = __float_as_uint(updated);
        pp.v[j] = __ushort_as_bfloat16(static_cast<unsigned short>(bits >> 16));
        mp.v[j] = static_cast<uint16_t>(bits & 0xffffu);
      } else {
        pp.v[j] = updated;
      }
    }
    store_pack<T, N>(p + i * N, pp);
    if constexpr (kMaster) store_pack<uint16_t, N>(mantissa + i * N, mp);
  }
}

template <typename T, typename A, int N>
void launch_apply(const T* x, const A* g, const A* gate, T* p, uint16_t* mantissa, int64_t packs, int64_t rows,
                  int64_t cols, bool per_row, const ApplyScalars<A>& c) {
  const unsigned blocks = grid_stride_blocks(packs, kThreads);
  if (gate != nullptr) {
    apply_kernel<T, A, N, true>
        <<<blocks, kThreads, 0, op_stream()>>>(x, g, gate, p, mantissa, packs, rows, cols, per_row, c);
  } else {
    apply_kernel<T, A, N, false>
        <<<blocks, kThreads, 0, op_stream()>>>(x, g, gate, p, mantissa, packs, rows, cols, per_row, c);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void normuon_momentum(const Tensor& grad, Tensor& momentum, Tensor& x, double mu) {
  const int64_t n = grad.numel();
  dispatch_floating_cuda(grad.dtype(), "normuon_momentum", [&]<typename T, typename A>() {
    const T* gp = device_ptr<T>(grad);
    A* mp = device_ptr<A>(momentum);
    T* xp = device_ptr<T>(x);
    const A mu_a = static_cast<A>(mu), one_mu = static_cast<A>(1.0 - mu);
    const bool packed =
        aligned_to(gp, sizeof(T) * kPack) && aligned_to(mp, sizeof(A) * kPack) && aligned_to(xp, sizeof(T) * kPack);
    const int64_t head = packed ? n / kPack * kPack : 0;
    if (head > 0) launch_momentum<T, A, kPack>(gp, mp, xp, head / kPack, mu_a, one_mu);
    launch_momentum<T, A, 1>(gp + head, mp + head, xp + head, n - head, mu_a, one_mu);
  });
}

void normuon_normalize(Tensor& x) {
  const int64_t count = x.size(0), per = x.size(1) * x.size(2);
  if (count == 0 || per == 0) return;
  GPT_CHECK(count <= 65535, "normuon_normalize: at most 65535 matrices per stack on CUDA, got ", count);
  // Enough chunks to fill the chip, each at least a few thousand elements.
  const int64_t wanted = std::max<int64_t>(1, 4 * multiprocessor_count() / count);
  const int64_t chunks = std::clamp<int64_t>((per + 4095) / 4096, 1, std::min<int64_t>(wanted, 1024));
  const int64_t chunk = (per + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>((per + chunk - 1) / chunk), static_cast<unsigned>(count));
  dispatch_floating_cuda(x.dtype(), "normuon_normalize", [&]<typename T, typename A>() {
    DeviceScratch partial(sizeof(A) * grid.x * grid.y);
    T* xp = device_ptr<T>(x);
    square_sum_kernel<T, A><<<grid, kThreads, 0, op_stream()>>>(xp, partial.as<A>(), per, chunk);
    GPT_CUDA_CHECK_LAUNCH();
    scale_by_norm_kernel<T, A><<<grid, kThreads, 0, op_stream()>>>(xp, partial.as<A>(), per, chunk);
    GPT_CUDA_CHECK_LAUNCH();
  });
}

void equalize_and_update(const Tensor& x, Tensor& second_moment, Tensor& param, Tensor& mantissa,
                         const NorMuonArgs& args, const Tensor* decay_gate) {
  const int64_t count = param.size(0), rows = param.size(1), cols = param.size(2);
  if (count == 0 || rows == 0 || cols == 0) return;
  GPT_CHECK(count <= 65535, "normuon_apply / anvil_apply: at most 65535 matrices per stack on CUDA, got ", count);
  const bool per_row = rows >= cols;
  const int64_t stats = per_row ? rows : cols;
  const int64_t q = per_row ? cols : rows;
  const double shape_mult = std::sqrt(std::max(1.0, static_cast<double>(rows) / static_cast<double>(cols)));
  dispatch_floating_cuda(param.dtype(), "normuon_apply", [&]<typename T, typename A>() {
    const T* xp = device_ptr<T>(x);
    const A* gate = decay_gate != nullptr ? device_ptr<A>(*decay_gate) : nullptr;
    A* sp = device_ptr<A>(second_moment);
    T* pp = device_ptr<T>(param);
    uint16_t* mp = std::is_same_v<T, __nv_bfloat16> ? device_ptr<uint16_t>(mantissa) : nullptr;
    DeviceScratch stat_buffer(sizeof(A) * count * stats);
    A* rg = stat_buffer.as<A>();

    if (per_row) {
      constexpr int kWarps = kThreads / 32;
      const int64_t total_rows = count * rows;
      row_mean_square_kernel<T, A>
          <<<static_cast<unsigned>((total_rows + kWarps - 1) / kWarps), kThreads, 0, op_stream()>>>(xp, rg, total_rows,
                                                                                                    cols);
    } else {
      const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads), static_cast<unsigned>(count));
      column_mean_square_kernel<T, A><<<grid, kThreads, 0, op_stream()>>>(xp, rg, rows, cols);
    }
    GPT_CUDA_CHECK_LAUNCH();
    second_moment_kernel<T, A><<<static_cast<unsigned>(count), 1024, 0, op_stream()>>>(
        rg, sp, stats, static_cast<A>(q), static_cast<A>(args.beta2), static_cast<A>(1.0 - args.beta2));
    GPT_CUDA_CHECK_LAUNCH();

    ApplyScalars<A> c{};
    for (int parity = 0; parity < 2; ++parity) {
      const double mat_mult = parity == 1 ? args.odd_matrix_lr_mul : 1.0;
      const double lr_eff = args.lr * shape_mult * mat_mult;
      c.lr_eff[parity] = static_cast<A>(lr_eff);
      c.decay[parity] = static_cast<A>(args.weight_decay * args.lr * lr_eff);
    }
    c.first_matrix = args.first_matrix;
    const int64_t n = count * rows * cols;
    const bool packed = cols % kPack == 0 && aligned_to(xp, sizeof(T) * kPack) && aligned_to(pp, sizeof(T) * kPack) &&
                        (mp == nullptr || aligned_to(mp, sizeof(uint16_t) * kPack)) &&
                        (gate == nullptr || aligned_to(gate, sizeof(A) * kPack));
    if (packed) {
      launch_apply<T, A, kPack>(xp, rg, gate, pp, mp, n / kPack, rows, cols, per_row, c);
    } else {
      launch_apply<T, A, 1>(xp, rg, gate, pp, mp, n, rows, cols, per_row, c);
    }
  });
}

void normuon_apply(const Tensor& x, Tensor& second_moment, Tensor& param, Tensor& mantissa, const NorMuonArgs& args) {
  equalize_and_update(x, second_moment, param, mantissa, args, nullptr);
}

}  // namespace gpt::cuda
