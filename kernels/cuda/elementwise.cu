// CUDA kernels of kernels/elementwise.h (mix_forward / mix_backward, versions in kernels/cuda/mix_variants.h). One
// warp per row, 16-byte packs when every row and coefficient block is 16-byte aligned. Coefficients are formed as
// in the CPU reference: S = f(s) rounded for out's dtype, coef = (S · L) in double, then cast to the accumulation
// type. Reductions run in a fixed order (lane layout, then rows in order) and are reproducible run to run.
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/kernel_version_env.h"
#include "kernels/cuda/mix_rows.cuh"
#include "kernels/cuda/mix_variants.h"
#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"

namespace gpt::cuda {

using namespace mix_rows;

namespace {

template <typename T, typename A, int VEC>
__global__ void mix_forward_kernel(const __grid_constant__ MixArgs args, T* out, int64_t rows, int64_t n) {
  __shared__ double s_scalar[kMaxTerms];
  load_term_scalars<T, A>(args, s_scalar);
  const int lane = threadIdx.x % 32;
  for (int64_t row = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32; row < rows; row += gridDim.x * int64_t{kWarps}) {
    for (int64_t c = lane * VEC; c < n; c += 32 * VEC) {
      A acc[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[j] = A(0);
      for (int k = 0; k < args.n_terms; ++k) {
        const TermArgs& a = args.t[k];
        const A coef = static_cast<A>(s_scalar[k] * lane_value<T>(a, row, c / (n / a.groups)));
        const Pack<T, VEC> x = load_pack<T, VEC>(static_cast<const T*>(a.x) + row * n + c);
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[j] += coef * to_acc<A>(x.v[j]);
      }
      Pack<T, VEC> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(acc[j]);
      store_pack<T, VEC>(out + row * n + c, o);
    }
  }
}

// Per row: coefficient gradients first (they read dout, which an overwriting dx may replace), then dx.
template <typename T, typename A, int VEC>
__global__ void mix_backward_kernel(const __grid_constant__ MixArgs args, const T* dout, int64_t rows, int64_t n,
                                    double* scalar_partial) {
  __shared__ double s_scalar[kMaxTerms];
  load_term_scalars<T, A>(args, s_scalar);
  const int lane = threadIdx.x % 32;
  for (int64_t row = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32; row < rows; row += gridDim.x * int64_t{kWarps}) {
    const T* d = dout + row * n;
    for (int k = 0; k < args.n_terms; ++k) {
      const TermArgs& a = args.t[k];
      if (!a.want_coef_grad) continue;
      const T* x = static_cast<const T*>(a.x) + row * n;
      const int64_t block = n / a.groups;
      double row_sum = 0.0;
      for (int64_t g = 0; g < a.groups; ++g) {
        A dot = 0;
        for (int64_t c = g * block + lane * VEC; c < (g + 1) * block; c += 32 * VEC) {
          const Pack<T, VEC> dv = load_pack<T, VEC>(d + c), xv = load_pack<T, VEC>(x + c);
#pragma unroll
          for (int j = 0; j < VEC; ++j) dot += to_acc<A>(dv.v[j]) * to_acc<A>(xv.v[j]);
        }
        dot = warp_sum(dot);
        if (lane == 0 && a.dlanes != nullptr) {
          T& slot = static_cast<T*>(a.dlanes)[row * a.lane_stride + a.lane + g];
          slot = from_acc<T>(to_acc<A>(slot) + static_cast<A>(s_scalar[k]) * dot);
        }
        row_sum += lane_value<T>(a, row, g) * static_cast<double>(dot);
      }
      if (lane == 0 && a.dscalar != nullptr) scalar_partial[k * rows + row] = row_sum;
    }
    __syncwarp();
    for (int64_t c = lane * VEC; c < n; c += 32 * VEC) {
      const Pack<T, VEC> dv = load_pack<T, VEC>(d + c);
      for (int k = 0; k < args.n_terms; ++k) {
        const TermArgs& a = args.t[k];
        if (a.dx == nullptr) continue;
        const A coef = static_cast<A>(s_scalar[k] * lane_value<T>(a, row, c / (n / a.groups)));
        T* dx = static_cast<T*>(a.dx) + row * n + c;
        Pack<T, VEC> o;
        if (a.overwrite_dx) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(coef * to_acc<A>(dv.v[j]));
        } else {
          o = load_pack<T, VEC>(dx);
#pragma unroll
          for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(to_acc<A>(o.v[j]) + coef * to_acc<A>(dv.v[j]));
        }
        store_pack<T, VEC>(dx, o);
      }
    }
  }
}

// v2 (packed rows only): the row's dout stays in registers (kPacks 16-byte packs per lane, slot p of lane l =
// pack 32p + l; bf16 rows of 768 take 3 slots), so that each term costs few rounds of loads: its x and dx packs and
// their lane values together, then the old dG values of the groups this lane owns, then the stores. v1 instead
// waits for a load per lane group and per dx pack. Terms run in order, so a dx written by one term is read back by
// a later one as in v1 (the host sends rows where a dx is some term's x to v1). Lane groups of P packs are reduced
// in registers: P a multiple of 32 — whole slots belong to one group, summed per lane, then one warp sum (lane 0
// owns the group); 32 a multiple of P — every slot holds 32 / P groups, summed by xor shuffles within aligned P-lane
// segments (the segment's first lane owns the group). dx uses v1's coefficients and arithmetic (the same bits); the
// coefficient gradients sum the same products in another order.
template <typename T, typename A, int kPacks>
__global__ void mix_backward_v2_kernel(const __grid_constant__ MixArgs args, const T* dout, int64_t rows, int64_t n,
                                       double* scalar_partial) {
  constexpr int VEC = kVec16<T>;
  __shared__ double s_scalar[kMaxTerms];
  load_term_scalars<T, A>(args, s_scalar);
  const int lane = threadIdx.x % 32;
  const int64_t packs = n / VEC;
  for (int64_t row = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32; row < rows; row += gridDim.x * int64_t{kWarps}) {
    Pack<T, VEC> dv[kPacks];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t pack = 32 * p + lane;
      if (pack < packs) dv[p] = load_pack<T, VEC>(dout + row * n + pack * VEC);
    }
    for (int k = 0; k < args.n_terms; ++k) {
      const TermArgs& a = args.t[k];
      const int64_t group_packs = packs / a.groups;
      const bool load_dx = a.dx != nullptr && !a.overwrite_dx;
      Pack<T, VEC> xv[kPacks], ov[kPacks];
      double lv[kPacks];  // L of each slot's lane group
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        const int64_t pack = 32 * p + lane;
        const bool valid = pack < packs;
        if (valid && a.want_coef_grad) xv[p] = load_pack<T, VEC>(static_cast<const T*>(a.x) + row * n + pack * VEC);
        if (valid && load_dx) ov[p] = load_pack<T, VEC>(static_cast<const T*>(a.dx) + row * n + pack * VEC);
        lv[p] = valid ? lane_value<T>(a, row, pack / group_packs) : 0.0;
      }
      if (a.want_coef_grad) {
        // Each slot's group sum, where this lane owns a group whose sum ends at that slot.
        A group_dot[kPacks];
        bool owner[kPacks];
        A sum = A(0);
        const int64_t slots_per_group = group_packs / 32;  // when group_packs % 32 == 0
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
          const int64_t pack = 32 * p + lane;
          A dot = A(0);
          if (pack < packs) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) dot += to_acc<A>(dv[p].v[j]) * to_acc<A>(xv[p].v[j]);
          }
          owner[p] = false;
          group_dot[p] = A(0);
          if (32 * p >= packs) continue;  // the same for every lane: no shuffle is skipped by some lanes only
          if (group_packs % 32 == 0) {
            sum += dot;
            if ((p + 1) % slots_per_group == 0) {
              group_dot[p] = warp_sum(sum);
              owner[p] = lane == 0;
              sum = A(0);
            }
          } else {  // group_packs divides 32 (checked by the host)
            dot = group_sum(dot, static_cast<int>(group_packs));
            group_dot[p] = dot;
            owner[p] = pack < packs && lane % group_packs == 0;
          }
        }
        if (a.dlanes != nullptr) {  // dG[row, lane + g] += S · dot_g: every old value first, then the stores
          T* dl = static_cast<T*>(a.dlanes) + row * a.lane_stride + a.lane;
          T old[kPacks];
#pragma unroll
          for (int p = 0; p < kPacks; ++p) {
            if (owner[p]) old[p] = dl[(32 * p + lane) / group_packs];
          }
#pragma unroll
          for (int p = 0; p < kPacks; ++p) {
            if (owner[p]) {
              dl[(32 * p + lane) / group_packs] =
                  from_acc<T>(to_acc<A>(old[p]) + static_cast<A>(s_scalar[k]) * group_dot[p]);
            }
          }
        }
        if (a.dscalar != nullptr) {
          double row_sum = 0.0;  // Σ_g L_g · dot_g, this lane's groups
#pragma unroll
          for (int p = 0; p < kPacks; ++p) {
            if (owner[p]) row_sum += lv[p] * static_cast<double>(group_dot[p]);
          }
          row_sum = warp_sum(row_sum);
          if (lane == 0) scalar_partial[k * rows + row] = row_sum;
        }
      }
      if (a.dx == nullptr) continue;
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        const int64_t pack = 32 * p + lane;
        if (pack >= packs) continue;
        const A coef = static_cast<A>(s_scalar[k] * lv[p]);
        Pack<T, VEC> o;
        if (a.overwrite_dx) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(coef * to_acc<A>(dv[p].v[j]));
        } else {
#pragma unroll
          for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(to_acc<A>(ov[p].v[j]) + coef * to_acc<A>(dv[p].v[j]));
        }
        store_pack<T, VEC>(static_cast<T*>(a.dx) + row * n + pack * VEC, o);
      }
    }
  }
}

// ---- one-pass versions for rows of whole-row coefficients (every term ungrouped: groups == 1) ------------------
// The residual mixes of the layer loop (§2.8) and the λ·W weight scalings (§2.9) have NT ≤ 5 terms whose coefficient
// is one number per row. v1 re-forms each term's coefficient for every pack (a double product and, for lane terms,
// a 64-bit division to find the pack's lane group) and, in the backward, walks the row once per term with one load
// latency after another. These versions form each coefficient once per row and handle all NT terms of a pack
// together (NT independent loads in flight per lane), in v1's arithmetic: the same coefficients, the same order of
// the per-element sums over terms and of the per-lane dot products over packs, the same warp sums, so that out, dx,
// dG and the scalar partials are bit-identical to v1's.

// mix_forward v2: out = Σ_k coef_k · x_k, packs of 16 bytes, one warp per row. With kNorm, also rmsnorm_forward of
// each row (mix_rmsnorm_forward): the warp keeps the row it wrote in shared memory (dynamic, kWarps rows of n) and
// runs rmsnorm's kernel arithmetic on it (the same lane order of the sum of squares, warp_sum, rms_inverse), so y and
// rstd are that kernel's bits without the norm reading out back from global memory.
template <typename T, typename A, int NT, bool kNorm>
__global__ void mix_forward_rows_kernel(const __grid_constant__ MixArgs args, T* out, int64_t rows, int packs,
                                        T* __restrict__ y, A* __restrict__ rstd, float eps) {
  constexpr int VEC = kVec16<T>;
  __shared__ double s_scalar[kMaxTerms];
  extern __shared__ uint4 norm_rows[];
  load_term_scalars<T, A>(args, s_scalar);
  const int lane = threadIdx.x % 32;
  const int64_t n = int64_t{packs} * VEC;
  T* row_copy = reinterpret_cast<T*>(norm_rows) + (threadIdx.x / 32) * n;
  for (int64_t row = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32; row < rows; row += gridDim.x * int64_t{kWarps}) {
    double lane_l[NT];
    A coef[NT];
    row_coefficients<T, A, NT>(args, s_scalar, row, lane_l, coef);
    for (int p = lane; p < packs; p += 32) {
      Pack<T, VEC> x[NT];
#pragma unroll
      for (int k = 0; k < NT; ++k) x[k] = load_pack<T, VEC>(static_cast<const T*>(args.t[k].x) + row * n + p * VEC);
      A acc[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[j] = A(0);
#pragma unroll
      for (int k = 0; k < NT; ++k) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[j] += coef[k] * to_acc<A>(x[k].v[j]);
      }
      Pack<T, VEC> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o.v[j] = from_acc<T>(acc[j]);
      store_pack<T, VEC>(out + row * n + p * VEC, o);
      if constexpr (kNorm) store_pack<T, VEC>(row_copy + p * VEC, o);
    }
    if constexpr (kNorm) {
      __syncwarp();
      const A inv =
          rms_inverse<A>(warp_row_sum_squares<A>(row_copy, static_cast<int>(n), lane), static_cast<int>(n), eps);
      if (lane == 0) rstd[row] = inv;
      for (int p = lane; p < packs; p += 32) {
        const Pack<T, VEC> x = load_pack<T, VEC>(row_copy + p * VEC);
        Pack<T, VEC> normed;
#pragma unroll
        for (int j = 0; j < VEC; ++j) normed.v[j] = from_acc<T>(to_acc<A>(x.v[j]) * inv);
        store_pack<T, VEC>(y + row * n + p * VEC, normed);
      }
      __syncwarp();  // every lane is done with the row before the next one overwrites it
    }
  }
}

// The packs per lane v2 is instantiated for (3: the recipe's bf16 rows of 768; or 4) when a packed row of `packs`
// packs suits it, else 0: every term's lane groups must tile the warp (their packs a multiple or a divisor of 32),
// and no dx may be a term's x (v2 reads a term's x after the earlier terms wrote their dx).
int mix_backward_v2_packs(const MixArgs& args, int64_t packs) {
  for (int k = 0; k < args.n_terms; ++k) {
    const int64_t group_packs = packs / args.t[k].groups;  // ≥ 1: can_pack saw whole packs per group
    if (group_packs < 1 || (group_packs % 32 != 0 && 32 % group_packs != 0)) return 0;
    for (int j = 0; j < args.n_terms; ++j) {
      if (args.t[k].dx != nullptr && args.t[k].dx == args.t[j].x) return 0;
    }
  }
  // More slots per lane hold more of the row in registers than leave room for warps (bf16, 8 slots: 251 registers).
  if (packs <= 32 * 3) return 3;
  if (packs <= 32 * 4) return 4;
  return 0;
}

}  // namespace

int mix_row_terms(std::span<const MixTerm> terms, std::span<const MixGrad> grads, const Tensor& out) {
  if (out.dtype() != DType::bf16) return 0;
  MixArgs args = pack_terms(terms, "mix_row_terms");
  pack_grads(args, grads);
  const int64_t n = out.numel() / out.size(0);
  return can_pack<__nv_bfloat16>(args, n, out.raw()) ? row_terms_for(args, !grads.empty()) : 0;
}

namespace {
int mix_forward_in_use() {
  static const int version = kernel_version_from_env("SPEEDRUN_MIX_FORWARD", kPromotedMixForward, kMixForwardVersions);
  return version;
}
}  // namespace

void mix_forward(std::span<const MixTerm> terms, Tensor& out) { mix_forward_version(terms, out, mix_forward_in_use()); }

void mix_rmsnorm_forward(std::span<const MixTerm> terms, Tensor& out, Tensor& y, Tensor& rstd, float eps) {
  using T = __nv_bfloat16;  // the one-pass kernel's only instantiation
  const int64_t rows = out.size(0), n = out.numel() / rows;
  const size_t row_bytes = static_cast<size_t>(n) * sizeof(T);
  const MixArgs args = pack_terms(terms, "mix_rmsnorm_forward");
  // One kernel where mix_forward would take the one-pass version, the norm's rows are the mix's (a 2-D out) and
  // kWarps rows fit the default 48 KiB of shared memory; otherwise the two ops.
  const bool fusable = out.dtype() == DType::bf16 && mix_forward_in_use() == 2 && out.size(-1) == n &&
                       row_bytes * kWarps <= 48 * 1024 && can_pack<T>(args, n, out.raw()) && aligned16(y.raw());
  const int row_terms = fusable ? row_terms_for(args, false) : 0;
  if (row_terms == 0) {
    cuda::mix_forward(terms, out);
    cuda::rmsnorm_forward(out, y, rstd, eps);
    return;
  }
  const int packs = static_cast<int>(n / kVec16<T>);
  with_row_terms(row_terms, [&](auto nt) {
    mix_forward_rows_kernel<T, float, decltype(nt)::value, true><<<row_blocks(rows), kWarps * 32, row_bytes * kWarps>>>(
        args, device_ptr<T>(out), rows, packs, device_ptr<T>(y), device_ptr<float>(rstd), eps);
  });
  GPT_CUDA_CHECK_LAUNCH();
}

void mix_forward_version(std::span<const MixTerm> terms, Tensor& out, int version) {
  GPT_CHECK(version >= 1 && version <= kMixForwardVersions, "mix_forward: no version ", version, " (1 to ",
            kMixForwardVersions, ")");
  const int64_t rows = out.size(0), n = out.numel() / rows;
  const MixArgs args = pack_terms(terms, "mix_forward");
  dispatch_floating_cuda(out.dtype(), "mix_forward", [&]<typename T, typename A>() {
    constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;  // the one-pass kernels' only instantiation
    const bool packed = can_pack<T>(args, n, out.raw());
    const int row_terms = kBf16 && version == 2 && packed ? row_terms_for(args, false) : 0;
    if (row_terms > 0) {
      if constexpr (kBf16) {
        const int packs = static_cast<int>(n / kVec16<T>);
        with_row_terms(row_terms, [&](auto nt) {
          mix_forward_rows_kernel<T, A, decltype(nt)::value, false>
              <<<row_blocks(rows), kWarps * 32>>>(args, device_ptr<T>(out), rows, packs, nullptr, nullptr, 0.0f);
        });
      }
    } else if (packed) {
      mix_forward_kernel<T, A, kVec16<T>><<<row_blocks(rows), kWarps * 32>>>(args, device_ptr<T>(out), rows, n);
    } else {
      mix_forward_kernel<T, A, 1><<<row_blocks(rows), kWarps * 32>>>(args, device_ptr<T>(out), rows, n);
    }
  });
  GPT_CUDA_CHECK_LAUNCH();
}

int mix_backward_in_use() {
  static const int version =
      kernel_version_from_env("SPEEDRUN_MIX_BACKWARD", kPromotedMixBackward, kMixBackwardVersions);
  return version;
}

void mix_backward(const Tensor& dout, std::span<const MixTerm> terms, std::span<const MixGrad> grads) {
  mix_backward_version(dout, terms, grads, mix_backward_in_use());
}

void mix_backward_version(const Tensor& dout, std::span<const MixTerm> terms, std::span<const MixGrad> grads,
                          int version) {
  GPT_CHECK(version >= 1 && version <= kMixBackwardVersions, "mix_backward: no version ", version, " (1 to ",
            kMixBackwardVersions, ")");
  const int64_t rows = dout.size(0), n = dout.numel() / rows;
  MixArgs args = pack_terms(terms, "mix_backward");
  const bool any_scalar_grad = pack_grads(args, grads);
  DeviceScratch partial(any_scalar_grad ? static_cast<size_t>(rows) * args.n_terms * sizeof(double) : 0,
                        kLegacyDefaultStream);
  double* partial_ptr = partial.as<double>();
  dispatch_floating_cuda(dout.dtype(), "mix_backward", [&]<typename T, typename A>() {
    constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;  // the one-pass kernels' only instantiation
    const bool packed = can_pack<T>(args, n, dout.raw());
    const int v2_packs = version == 2 && packed ? mix_backward_v2_packs(args, n / kVec16<T>) : 0;
    const int row_terms = kBf16 && (version == 3 || version == 4) && packed ? row_terms_for(args, true) : 0;
    if (row_terms > 0) {
      if constexpr (kBf16) {
        const int packs = static_cast<int>(n / kVec16<T>);
        with_row_terms(row_terms, [&](auto nt) {
          constexpr int kTerms = decltype(nt)::value;
          if (version == 3) {
            mix_backward_rows_kernel<T, A, kTerms, 1>
                <<<row_blocks(rows), kWarps * 32>>>(args, StoredDout<T>{device_ptr<T>(dout)}, rows, packs, partial_ptr);
          } else {
            mix_backward_rows_kernel<T, A, kTerms, 4>
                <<<row_blocks(rows), kWarps * 32>>>(args, StoredDout<T>{device_ptr<T>(dout)}, rows, packs, partial_ptr);
          }
        });
      }
    } else if (v2_packs == 3) {
      mix_backward_v2_kernel<T, A, 3>
          <<<row_blocks(rows), kWarps * 32>>>(args, device_ptr<T>(dout), rows, n, partial_ptr);
    } else if (v2_packs == 4) {
      mix_backward_v2_kernel<T, A, 4>
          <<<row_blocks(rows), kWarps * 32>>>(args, device_ptr<T>(dout), rows, n, partial_ptr);
    } else if (packed) {
      mix_backward_kernel<T, A, kVec16<T>>
          <<<row_blocks(rows), kWarps * 32>>>(args, device_ptr<T>(dout), rows, n, partial_ptr);
    } else {
      mix_backward_kernel<T, A, 1><<<row_blocks(rows), kWarps * 32>>>(args, device_ptr<T>(dout), rows, n, partial_ptr);
    }
    GPT_CUDA_CHECK_LAUNCH();
    if (!any_scalar_grad) return;
    mix_scalar_grad_kernel<T, A><<<args.n_terms, kScalarGradThreads>>>(args, partial_ptr, rows);
    GPT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpt::cuda
