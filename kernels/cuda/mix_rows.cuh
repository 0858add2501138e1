#pragma once
// The pieces of the CUDA mix kernels (kernels/elementwise.h) that more than one translation unit launches: the
// kernel arguments, the coefficient helpers, mix_backward's one-pass kernel (v3/v4, kernels/cuda/mix_variants.h),
// the scalar-gradient reduction and the host-side packing and eligibility checks. kernels/cuda/elementwise.cu runs
// mix_forward and mix_backward with them, kernels/cuda/mix_norm_backward.cu mix_rmsnorm_backward.
#include <cuda_bf16.h>

#include <cstdint>
#include <span>
#include <type_traits>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/elementwise.h"

namespace gpt::cuda::mix_rows {

inline constexpr int kMaxTerms = 16;
inline constexpr int kWarps = 8;

struct TermArgs {
  const void* x = nullptr;
  const void* scalar = nullptr;  // A [1] or null
  const void* lanes = nullptr;   // T [rows, lane_stride] or null
  void* dx = nullptr;
  void* dlanes = nullptr;
  void* dscalar = nullptr;  // A [1] or null
  int64_t lane_stride = 0, lane = 0, groups = 1;
  double offset = 0.0;
  ScalarFn fn = ScalarFn::identity;
  int overwrite_dx = 0;
  int want_coef_grad = 0;
};

struct MixArgs {
  int n_terms = 0;
  TermArgs t[kMaxTerms];
};

// S and f'(s) of one term (identical in every thread).
template <typename T, typename A>
__device__ __forceinline__ double term_scalar(const TermArgs& a, double* ds_ds) {
  if (a.scalar == nullptr) {
    *ds_ds = 0.0;
    return 1.0;
  }
  double s = static_cast<double>(static_cast<const A*>(a.scalar)[0]);
  if (a.fn == ScalarFn::sigmoid) {
    s = sigmoid_d(s);
    *ds_ds = s * (1.0 - s);
  } else {
    *ds_ds = 1.0;
  }
  return a.fn == ScalarFn::unrounded ? s : scalar_for<T>(s);
}

template <typename T>
__device__ __forceinline__ double lane_value(const TermArgs& a, int64_t row, int64_t g) {
  if (a.lanes == nullptr) return 1.0;
  const T* l = static_cast<const T*>(a.lanes);
  return a.offset + static_cast<double>(to_acc<float>(l[row * a.lane_stride + a.lane + g]));
}
// f64 lanes keep full precision.
template <>
__device__ __forceinline__ double lane_value<double>(const TermArgs& a, int64_t row, int64_t g) {
  if (a.lanes == nullptr) return 1.0;
  return a.offset + static_cast<const double*>(a.lanes)[row * a.lane_stride + a.lane + g];
}

// Every term's S into shared memory, for the whole block.
template <typename T, typename A>
__device__ __forceinline__ void load_term_scalars(const MixArgs& args, double* s_scalar) {
  if (threadIdx.x < args.n_terms) {
    double unused;
    s_scalar[threadIdx.x] = term_scalar<T, A>(args.t[threadIdx.x], &unused);
  }
  __syncthreads();
}

// ---- one-pass versions for rows of whole-row coefficients (kernels/cuda/elementwise.cu says why) -------------

// NT whole-row coefficients of one row, as v1 forms them for every pack.
template <typename T, typename A, int NT>
__device__ __forceinline__ void row_coefficients(const MixArgs& args, const double* s_scalar, int64_t row,
                                                 double (&lane_l)[NT], A (&coef)[NT]) {
#pragma unroll
  for (int k = 0; k < NT; ++k) {
    lane_l[k] = lane_value<T>(args.t[k], row, 0);
    coef[k] = static_cast<A>(s_scalar[k] * lane_l[k]);
  }
}

// mix_backward's dout as stored in memory: Dout of mix_backward_rows_kernel, which asks per row for a Row (state
// formed once per row, none here) and per 16-byte pack at element offset `at` for dout's pack.
template <typename T>
struct StoredDout {
  const T* dout;
  struct Row {};
  __device__ __forceinline__ Row row(int64_t /*row*/, int /*n*/, int /*lane*/) const { return {}; }
  __device__ __forceinline__ Pack<T, kVec16<T>> pack(Row /*row*/, int64_t at) const {
    return load_pack<T, kVec16<T>>(dout + at);
  }
};

// mix_backward v3: per pack, dout and every term's x (for its coefficient gradient) and old dx are loaded together,
// each term's dot product gains the pack, and the dx packs are written; after the row, the NT warp sums, then dG
// read-modify-writes and scalar partials in term order (lane 0). dout is read before any dx of its pack is written,
// so a dx may overwrite dout in place; the host sends rows where a dx is some term's x, or two terms share a dx, to
// v1. Dout gives the row's dout packs: StoredDout reads them from memory (mix_backward), NormedDout
// (kernels/cuda/mix_norm_backward.cu) forms them from the norm's gradient (mix_rmsnorm_backward).
// kMinBlocks > 1 caps the registers (v4: 4 blocks of 8 warps per SM, 64 registers) at the price of spills; v3 leaves
// them to the compiler (≈ 120 for four terms: 2 blocks per SM, more loads in flight per warp).
template <typename T, typename A, int NT, int kMinBlocks, typename Dout>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks)
    mix_backward_rows_kernel(const __grid_constant__ MixArgs args, const Dout dout, int64_t rows, int packs,
                             double* scalar_partial) {
  constexpr int VEC = kVec16<T>;
  __shared__ double s_scalar[kMaxTerms];
  load_term_scalars<T, A>(args, s_scalar);
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t{packs} * VEC;
  for (int64_t row = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32; row < rows; row += gridDim.x * int64_t{kWarps}) {
    double lane_l[NT];
    A coef[NT];
    row_coefficients<T, A, NT>(args, s_scalar, row, lane_l, coef);
    const typename Dout::Row dout_row = dout.row(row, static_cast<int>(n), lane);
    A dot[NT];
#pragma unroll
    for (int k = 0; k < NT; ++k) dot[k] = A(0);
#pragma unroll 1  // the terms' loads are the parallelism; unrolled packs would cost occupancy in registers
    for (int p = lane; p < packs; p += 32) {
      const int64_t at = row * n + int64_t{p} * VEC;
      const Pack<T, VEC> dv = dout.pack(dout_row, at);
      Pack<T, VEC> xv[NT], ov[NT];
#pragma unroll
      for (int k = 0; k < NT; ++k) {
        const TermArgs& a = args.t[k];
        if (a.want_coef_grad) xv[k] = load_pack<T, VEC>(static_cast<const T*>(a.x) + at);
        if (a.dx != nullptr && !a.overwrite_dx) ov[k] = load_pack<T, VEC>(static_cast<const T*>(a.dx) + at);
      }
#pragma unroll
      for (int k = 0; k < NT; ++k) {
        const TermArgs& a = args.t[k];
        if (a.want_coef_grad) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) dot[k] += to_acc<A>(dv.v[j]) * to_acc<A>(xv[k].v[j]);
        }
        if (a.dx == nullptr) continue;
        Pack<T, VEC> o;
        if (a.overwrite_dx) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(coef[k] * to_acc<A>(dv.v[j]));
        } else {
#pragma unroll
          for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(to_acc<A>(ov[k].v[j]) + coef[k] * to_acc<A>(dv.v[j]));
        }
        store_pack<T, VEC>(static_cast<T*>(a.dx) + at, o);
      }
    }
#pragma unroll
    for (int k = 0; k < NT; ++k) {
      if (args.t[k].want_coef_grad) dot[k] = warp_sum(dot[k]);
    }
    if (lane == 0) {
#pragma unroll
      for (int k = 0; k < NT; ++k) {
        const TermArgs& a = args.t[k];
        if (!a.want_coef_grad) continue;
        if (a.dlanes != nullptr) {
          T& slot = static_cast<T*>(a.dlanes)[row * a.lane_stride + a.lane];
          slot = from_acc<T>(to_acc<A>(slot) + static_cast<A>(s_scalar[k]) * dot[k]);
        }
        if (a.dscalar != nullptr) scalar_partial[k * rows + row] = lane_l[k] * static_cast<double>(dot[k]);
      }
    }
  }
}

// dscalar_k += f'(s_k) · Σ_rows partial[k][row]: one block per term, fixed-order tree in double. 1024 threads with
// 8 independent loads in flight each: one block walks 49,152 partials in a few load latencies (the 256-thread loop
// of one dependent load at a time took 72 µs per call).
inline constexpr int kScalarGradThreads = 1024;

template <typename T, typename A>
__global__ void __launch_bounds__(kScalarGradThreads)
    mix_scalar_grad_kernel(const __grid_constant__ MixArgs args, const double* scalar_partial, int64_t rows) {
  __shared__ double shared32[32];
  const int k = blockIdx.x;
  A* ds = static_cast<A*>(args.t[k].dscalar);
  if (ds == nullptr) return;
  constexpr int kInFlight = 8;
  const double* partial = scalar_partial + k * rows;
  double lanes[kInFlight] = {};
  int64_t r = threadIdx.x;
  for (; r + (kInFlight - 1) * kScalarGradThreads < rows; r += kInFlight * kScalarGradThreads) {
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) lanes[i] += partial[r + i * kScalarGradThreads];
  }
  for (; r < rows; r += kScalarGradThreads) lanes[0] += partial[r];
  double sum = 0.0;
#pragma unroll
  for (int i = 0; i < kInFlight; ++i) sum += lanes[i];
  sum = block_sum(sum, shared32);
  if (threadIdx.x == 0) {
    double ds_ds;
    term_scalar<T, A>(args.t[k], &ds_ds);
    ds[0] = static_cast<A>(static_cast<double>(ds[0]) + ds_ds * sum);
  }
}

inline MixArgs pack_terms(std::span<const MixTerm> terms, const char* op) {
  GPT_CHECK(terms.size() <= static_cast<size_t>(kMaxTerms), op, ": at most ", kMaxTerms, " terms on CUDA, got ",
            terms.size());
  MixArgs args;
  args.n_terms = static_cast<int>(terms.size());
  for (size_t k = 0; k < terms.size(); ++k) {
    const Coef& c = terms[k].coef;
    TermArgs& a = args.t[k];
    a.x = terms[k].x.raw();
    if (c.scalar.defined()) {
      GPT_CHECK(c.scalar.device() == Device::cuda, op, ": scalar of term ", k, " must be on the GPU");
      a.scalar = c.scalar.raw();
      a.fn = c.fn;
    }
    if (c.lanes.defined()) {
      a.lanes = c.lanes.raw();
      a.lane_stride = c.lanes.size(1);
      a.lane = c.lane;
      a.groups = c.groups;
      a.offset = c.offset;
    }
  }
  return args;
}

// The gradient outputs of each term into args; returns whether any term wants its scalar's gradient.
inline bool pack_grads(MixArgs& args, std::span<const MixGrad> grads) {
  bool any_scalar_grad = false;
  for (size_t k = 0; k < grads.size(); ++k) {
    TermArgs& a = args.t[k];
    if (grads[k].dx.defined()) a.dx = const_cast<void*>(grads[k].dx.raw());
    a.overwrite_dx = grads[k].overwrite_dx ? 1 : 0;
    if (grads[k].dlanes.defined()) a.dlanes = const_cast<void*>(grads[k].dlanes.raw());
    if (grads[k].dscalar.defined()) {
      a.dscalar = const_cast<void*>(grads[k].dscalar.raw());
      any_scalar_grad = true;
    }
    a.want_coef_grad = (grads[k].dlanes.defined() || grads[k].dscalar.defined()) ? 1 : 0;
  }
  return any_scalar_grad;
}

// 16-byte packs need every row, every coefficient block and every base pointer aligned.
template <typename T>
inline bool can_pack(const MixArgs& args, int64_t n, const void* out) {
  constexpr int kVec = kVec16<T>;
  if (n % kVec != 0 || !aligned16(out)) return false;
  for (int k = 0; k < args.n_terms; ++k) {
    const TermArgs& a = args.t[k];
    if ((n / a.groups) % kVec != 0 || !aligned16(a.x) || (a.dx != nullptr && !aligned16(a.dx))) return false;
  }
  return true;
}

inline unsigned row_blocks(int64_t rows) { return blocks_for(rows, kWarps, 1 << 20); }

// The term count the one-pass versions take, when every term is ungrouped (0 sends the call to v1). The backward
// also needs dx tensors that are no term's x and that no two terms share (it loads every term's old dx before
// writing any). Instantiated for packed bf16 rows only, the recipe's dtype.
inline constexpr int kMaxRowTerms = 5;
inline int row_terms_for(const MixArgs& args, bool backward) {
  if (args.n_terms < 1 || args.n_terms > kMaxRowTerms) return 0;
  for (int k = 0; k < args.n_terms; ++k) {
    const TermArgs& a = args.t[k];
    if (a.groups != 1) return 0;
    if (!backward || a.dx == nullptr) continue;
    for (int j = 0; j < args.n_terms; ++j) {
      if (a.dx == args.t[j].x || (j != k && a.dx == args.t[j].dx)) return 0;
    }
  }
  return args.n_terms;
}

// Runs KERNEL<T, A, NT> for NT = terms (1 … kMaxRowTerms) with the launch arguments given.
template <int NT = 1, typename Launch>
void with_row_terms(int terms, Launch&& launch) {
  if constexpr (NT <= kMaxRowTerms) {
    if (terms == NT) {
      launch(std::integral_constant<int, NT>{});
    } else {
      with_row_terms<NT + 1>(terms, launch);
    }
  }
}

}  // namespace gpt::cuda::mix_rows
