// CUDA kernels of kernels/softcap_loss.h. Training loss in two versions (kernels/cuda/softcap_loss_variants.h):
//
// v1: one block per row of V logits, two sweeps over the row (the second one mostly hits L2: a block's row is 100 KB
// in bf16) and nothing stored in between. Sweep 1 sums exp(z − 23) (z = 23·s ∈ [0, 23], so this fixed shift never
// overflows and needs no running max); lse = 23 + log(sum). Sweep 2 writes the softmax part of the gradient for every
// column. After a barrier one thread rewrites the few target columns (MTP targets and the prefix target) with their
// weights subtracted, and computes the row's loss. Row losses go to a scratch array and are summed in row order
// (deterministic).
//
// v2: one read of the row, s kept in shared memory; see the comment above softcap_train_kernel_v2.
//
// Math in the accumulation type; for fp32 the exponentials and the sigmoid use the fast intrinsics (a few ulp of
// fp32, far below the bf16 rounding of s and of dz_raw). s is rounded to z_raw's dtype as §3.1 requires.
#include <climits>

#include "kernels/cuda/fast_math.cuh"
#include "kernels/cuda/fp8_convert.cuh"
#include "kernels/cuda/softcap_loss_variants.h"
#include "kernels/cuda/validation_rows.cuh"
#include "kernels/softcap_loss.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kMaxMtp = 8;

struct LossArgs {
  float mtp[kMaxMtp] = {};
  int n_mtp = 0;
  float prefix_weight = 0.0f;
  float loss_scale = 1.0f;
  float grad_scale = 1.0f;
};

template <typename A>
__device__ __forceinline__ A fast_exp(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return __expf(x);
  } else {
    return exp(x);
  }
}

// s = σ((z_raw + 5)/7.5) rounded to T (§3.1).
template <typename T, typename A>
__device__ __forceinline__ A softcap_s(T raw) {
  const A a = (to_acc<A>(raw) + A(kSoftcapShift)) / A(kSoftcapDivisor);
  A s;
  if constexpr (std::is_same_v<A, float>) {
    s = __fdividef(1.0f, 1.0f + __expf(-max_keeping_nan(a, -80.0f)));
  } else {
    s = A(0.5) + A(0.5) * tanh(A(0.5) * a);
  }
  return to_acc<A>(from_acc<T>(s));
}

template <typename A>
__device__ __forceinline__ A gradient(A s, A softmax_weighted, A scale) {
  return scale * softmax_weighted * (A(kSoftcap) / A(kSoftcapDivisor)) * s * (A(1) - s);
}

template <typename T, typename A, bool kE5m2>
__device__ __forceinline__ void store_grad(void* dz, int64_t i, A g, float grad_scale) {
  if constexpr (kE5m2) {
    static_cast<uint8_t*>(dz)[i] = float_to_fp8_device<true>(static_cast<float>(g) / grad_scale);
  } else {
    static_cast<T*>(dz)[i] = from_acc<T>(g);
  }
}

template <typename T, typename A, int VEC, bool kE5m2>
__global__ void __launch_bounds__(kThreads)
    softcap_train_kernel_v1(const T* __restrict__ z_raw, const int64_t* __restrict__ targets,
                            const int64_t* __restrict__ prefix, const LossArgs args, int64_t rows, int64_t vocab,
                            void* __restrict__ dz, double* __restrict__ row_loss) {
  __shared__ A shared32[32];
  using OutT = std::conditional_t<kE5m2, uint8_t, T>;
  A w_all = 0;
  for (int k = 0; k < args.n_mtp; ++k) w_all += A(args.mtp[k]);
  const A scale = A(args.loss_scale);
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    const T* zr = z_raw + t * vocab;
    const int64_t packs = vocab / VEC;
    A sum = 0;
    for (int64_t p = threadIdx.x; p < packs; p += kThreads) {
      const Pack<T, VEC> v = load_pack<T, VEC>(zr + p * VEC);
#pragma unroll
      for (int j = 0; j < VEC; ++j) sum += fast_exp(A(kSoftcap) * softcap_s<T, A>(v.v[j]) - A(kSoftcap));
    }
    const A lse = A(kSoftcap) + log(block_sum(sum, shared32));
    const int64_t pt = prefix != nullptr ? prefix[targets[t]] : -1;
    const A s_w = w_all + (pt >= 0 ? A(args.prefix_weight) : A(0));
    OutT* dzr = static_cast<OutT*>(dz) + t * vocab;
    for (int64_t p = threadIdx.x; p < packs; p += kThreads) {
      const Pack<T, VEC> v = load_pack<T, VEC>(zr + p * VEC);
      Pack<OutT, VEC> out;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const A s = softcap_s<T, A>(v.v[j]);
        const A g = gradient(s, s_w * fast_exp(A(kSoftcap) * s - lse), scale);
        if constexpr (kE5m2) {
          out.v[j] = float_to_fp8_device<true>(static_cast<float>(g) / args.grad_scale);
        } else {
          out.v[j] = from_acc<T>(g);
        }
      }
      store_pack<OutT, VEC>(dzr + p * VEC, out);
    }
    __syncthreads();  // the target columns below overwrite values written by other threads
    if (threadIdx.x == 0) {
      int64_t cols[kMaxMtp + 1];
      A weights[kMaxMtp + 1];
      int n_cols = 0;
      for (int k = 0; k < args.n_mtp && t + k < rows; ++k) {
        cols[n_cols] = targets[t + k];
        weights[n_cols++] = A(args.mtp[k]);
      }
      if (pt >= 0) {
        cols[n_cols] = pt;
        weights[n_cols++] = A(args.prefix_weight);
      }
      double l = 0.0;
      for (int i = 0; i < n_cols; ++i) {
        const A s = softcap_s<T, A>(zr[cols[i]]);
        const A z = A(kSoftcap) * s;
        l += static_cast<double>(weights[i] * (lse - z));
        A d = s_w * fast_exp(z - lse);
        for (int j = 0; j < n_cols; ++j) {
          if (cols[j] == cols[i]) d -= weights[j];
        }
        store_grad<T, A, kE5m2>(dzr, cols[i], gradient(s, d, scale), args.grad_scale);
      }
      row_loss[t] = l;
    }
  }
}

// ---- v2 ------------------------------------------------------------------------------------------------------------
// One block of kThreadsV2 threads per row. Sweep 1 reads the row from global memory once (kChunkV2 16-byte packs per
// thread in flight), computes s rounded to T and keeps it in shared memory (V·sizeof(T) bytes: 100 KB for bf16 at
// V = 50,304, so two blocks share an SM and one block's barrier overlaps the other's loads; the register file could
// not hold two such rows), and sums exp(23·s − 23). Sweep 2 reads s back from shared memory and writes the gradient:
// one exponential per element, no second sigmoid, no second read of z_raw. Thread i owns packs i, i + kThreadsV2, …
// in both sweeps and in every row, so reading its own s back needs no barrier.
//
// Target columns: lanes 0..kTargetSlots−1 of warp 0 fetch column k (MTP target y[t+k], or for slot n the prefix
// target P_t) and publish it in a per-row slot table before the reduction barrier. After sweep 2 the thread that owns
// a target's pack rewrites that element (its own earlier store, so program order suffices) and writes the loss term
// w·(lse − z) to row_terms[t][slot]; absent slots get 0.0. The row loss is then Σ_slot in slot order, the same order
// and double arithmetic as v1. Slot tables alternate between rows: a thread still reading row r's table cannot be
// overtaken by a write for row r + 2, since that needs the reduction barrier of row r + 1.
//
// fp32 math: exp and the sigmoid's exp are ex2.approx with log2(e) folded into one FFMA, the reciprocal rcp.approx
// (both ≈ 1–2 ulp, like v1's __expf / __fdividef); f64 keeps v1's exact formulas.
constexpr int kThreadsV2 = 512;
// Two rows per SM (64 registers per thread at most); f64's exact tanh and exp spill under that cap, and an f64 row
// that fits shared memory (V ≤ 29k) leaves room for one block per SM anyway.
template <typename A>
inline constexpr int kMinBlocksV2 = std::is_same_v<A, double> ? 1 : 2;
constexpr int kChunkV2 = 4;       // packs per thread loaded before any is used (memory-level parallelism)
constexpr int kTargetSlots = 12;  // ≥ kMaxMtp + 1, a multiple of 4 so the owner ids load as int4
constexpr int kTermStride = kMaxMtp + 1;
static_assert(kTargetSlots >= kMaxMtp + 1 && kTargetSlots % 4 == 0 && kTargetSlots <= 32);

struct alignas(16) TargetSlots {
  int owner[kTargetSlots];  // thread that owns the column's pack, −1 for an absent target
  int col[kTargetSlots];    // −1 for an absent target (never equal to a real column)
  float weight[kTargetSlots];
  float softmax_weight;  // S_w of the row (§3.3: all n weights, plus w_P when P_t ≥ 0)
};

// exp(−a) = 2^(z_raw·kSigmoidSlope + kSigmoidOffset) for a = (z_raw + 5)/7.5; v1 clamps a ≥ −80 (kSigmoidClamp).
constexpr float kSigmoidSlope = -kLog2e / kSoftcapDivisor;
constexpr float kSigmoidOffset = -kSoftcapShift * kLog2e / kSoftcapDivisor;
constexpr float kSigmoidClamp = 80.0f * kLog2e;
constexpr float kCapLog2e = kSoftcap * kLog2e;  // exp(23·s − c) = 2^(s·kCapLog2e − c·log2 e)

// Rounds VEC accumulator values to T (bf16 in pairs: one conversion per two elements).
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> round_pack(const float (&v)[VEC]) {
  Pack<T, VEC> out;
  if constexpr (std::is_same_v<T, __nv_bfloat16> && VEC % 2 == 0) {
#pragma unroll
    for (int j = 0; j < VEC; j += 2) {
      const __nv_bfloat162 pair = __floats2bfloat162_rn(v[j], v[j + 1]);
      out.v[j] = pair.x;
      out.v[j + 1] = pair.y;
    }
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) out.v[j] = from_acc<T>(v[j]);
  }
  return out;
}

// Sweep-1 work on one pack: s rounded to T, and Σ exp(23·s − 23) added to sum.
template <typename T, typename A, int VEC>
__device__ __forceinline__ Pack<T, VEC> softcap_pack(const Pack<T, VEC>& raw, A& sum) {
  if constexpr (std::is_same_v<A, float>) {
    float s[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float exp_neg_a =
          fast_exp2(min_keeping_nan(fmaf(to_acc<float>(raw.v[j]), kSigmoidSlope, kSigmoidOffset), kSigmoidClamp));
      s[j] = fast_rcp(1.0f + exp_neg_a);
    }
    const Pack<T, VEC> rounded = round_pack<T, VEC>(s);
#pragma unroll
    for (int j = 0; j < VEC; ++j) sum += fast_exp2(fmaf(to_acc<float>(rounded.v[j]), kCapLog2e, -kCapLog2e));
    return rounded;
  } else {
    Pack<T, VEC> rounded;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A s = softcap_s<T, A>(raw.v[j]);
      rounded.v[j] = from_acc<T>(s);
      sum += exp(A(kSoftcap) * s - A(kSoftcap));
    }
    return rounded;
  }
}

// Per-row constants of sweep 2. fp32: g = softmax_factor · 2^(s·kCapLog2e + exp_offset) · (s − s²) for a non-target
// column, g = out_factor · d · (s − s²) with d = S_w·softmax − Σ weights for a target column; out_factor folds
// loss_scale, 23/7.5 and (for e5m2) 1/grad_scale.
template <typename A>
struct RowGradient {
  A lse, softmax_weight, out_factor, softmax_factor, exp_offset;
};

// Gradient of one element from its s; correction = −Σ weights of the predictions targeting it (0 for most).
template <typename A, bool kE5m2>
__device__ __forceinline__ A element_gradient(A s, A correction, const RowGradient<A>& rg, const LossArgs& args) {
  if constexpr (std::is_same_v<A, float>) {
    const float softmax = fast_exp2(fmaf(s, kCapLog2e, rg.exp_offset));
    return rg.out_factor * (rg.softmax_weight * softmax + correction) * fmaf(-s, s, s);
  } else {
    const A g = gradient(s, rg.softmax_weight * exp(A(kSoftcap) * s - rg.lse) + correction, A(args.loss_scale));
    return kE5m2 ? A(static_cast<float>(g) / args.grad_scale) : g;
  }
}

template <typename T, typename A, int VEC, bool kE5m2>
__device__ __forceinline__ void store_gradient_pack(const Pack<T, VEC>& s_pack, const RowGradient<A>& rg,
                                                    const LossArgs& args, void* dz_row, int pack) {
  A g[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const A s = to_acc<A>(s_pack.v[j]);
    if constexpr (std::is_same_v<A, float>) {
      g[j] = rg.softmax_factor * fast_exp2(fmaf(s, kCapLog2e, rg.exp_offset)) * fmaf(-s, s, s);
    } else {
      g[j] = element_gradient<A, kE5m2>(s, A(0), rg, args);
    }
  }
  if constexpr (kE5m2) {
    Pack<uint8_t, VEC> out;
    if constexpr (std::is_same_v<A, float>) {
      out = fp8_pack<true, VEC>(g);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) out.v[j] = float_to_fp8_device<true>(static_cast<float>(g[j]));
    }
    store_pack<uint8_t, VEC>(static_cast<uint8_t*>(dz_row) + static_cast<int64_t>(pack) * VEC, out);
  } else {
    Pack<T, VEC> out;
    if constexpr (std::is_same_v<A, float>) {
      out = round_pack<T, VEC>(g);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) out.v[j] = from_acc<T>(g[j]);
    }
    store_pack<T, VEC>(static_cast<T*>(dz_row) + static_cast<int64_t>(pack) * VEC, out);
  }
}

template <typename T, typename A, int VEC, bool kE5m2>
__global__ void __launch_bounds__(kThreadsV2, kMinBlocksV2<A>)
    softcap_train_kernel_v2(const T* __restrict__ z_raw, const int64_t* __restrict__ targets,
                            const int64_t* __restrict__ prefix, const LossArgs args, int64_t rows, int vocab,
                            void* __restrict__ dz, double* __restrict__ row_terms) {
  extern __shared__ uint4 row_storage[];  // s of the block's row, vocab elements of T
  auto* s_packs = reinterpret_cast<Pack<T, VEC>*>(row_storage);
  const T* s_elems = reinterpret_cast<const T*>(row_storage);
  __shared__ A shared32[32];
  __shared__ TargetSlots slot_tables[2];
  using OutT = std::conditional_t<kE5m2, uint8_t, T>;
  const int tid = static_cast<int>(threadIdx.x);
  const int packs = vocab / VEC;
  A w_all = 0;
#pragma unroll
  for (int k = 0; k < kMaxMtp; ++k) {
    if (k < args.n_mtp) w_all += A(args.mtp[k]);
  }
  int parity = 0;
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x, parity ^= 1) {
    const T* zr = z_raw + t * vocab;
    // Slot lanes fetch their target column now; it is published after sweep 1, so the loads overlap it.
    int slot_col = -1;
    float slot_weight = 0.0f;
    if (tid < kTargetSlots) {
      if (tid < args.n_mtp) {
#pragma unroll
        for (int k = 0; k < kMaxMtp; ++k) {
          if (k == tid) slot_weight = args.mtp[k];  // static indices: the arguments stay in the constant bank
        }
        if (t + tid < rows) slot_col = static_cast<int>(targets[t + tid]);  // targets beyond the microbatch drop
      } else if (tid == args.n_mtp) {
        slot_weight = args.prefix_weight;
        if (prefix != nullptr) slot_col = static_cast<int>(prefix[targets[t]]);
      }
    }

    A sum = 0;
    for (int base = tid; base < packs; base += kChunkV2 * kThreadsV2) {
      Pack<T, VEC> raw[kChunkV2];
#pragma unroll
      for (int c = 0; c < kChunkV2; ++c) {
        const int p = base + c * kThreadsV2;
        if (p < packs) raw[c] = load_pack<T, VEC>(zr + static_cast<int64_t>(p) * VEC);
      }
#pragma unroll
      for (int c = 0; c < kChunkV2; ++c) {
        const int p = base + c * kThreadsV2;
        if (p < packs) s_packs[p] = softcap_pack<T, A, VEC>(raw[c], sum);
      }
    }

    TargetSlots& slots = slot_tables[parity];
    if (tid < kTargetSlots) {
      slots.col[tid] = slot_col;
      slots.owner[tid] = slot_col >= 0 ? (slot_col / VEC) % kThreadsV2 : -1;
      slots.weight[tid] = slot_weight;
      if (tid == args.n_mtp) slots.softmax_weight = float(w_all) + (slot_col >= 0 ? args.prefix_weight : 0.0f);
      if (tid < kTermStride && slot_col < 0) row_terms[t * kTermStride + tid] = 0.0;
    }
    const A lse = A(kSoftcap) + log(block_sum(sum, shared32));  // its barriers also publish the slot table

    RowGradient<A> rg;
    rg.lse = lse;
    // v1 forms S_w in A; for f64 recompute it there rather than through the float slot.
    rg.softmax_weight = std::is_same_v<A, float> ? A(slots.softmax_weight)
                                                 : w_all + (slots.col[args.n_mtp] >= 0 ? A(args.prefix_weight) : A(0));
    rg.out_factor = A(args.loss_scale) * (A(kSoftcap) / A(kSoftcapDivisor));
    if constexpr (kE5m2 && std::is_same_v<A, float>) rg.out_factor /= args.grad_scale;
    rg.softmax_factor = rg.out_factor * rg.softmax_weight;
    rg.exp_offset = -lse * A(kLog2e);
    OutT* dzr = static_cast<OutT*>(dz) + t * vocab;
    for (int p = tid; p < packs; p += kThreadsV2) {
      store_gradient_pack<T, A, VEC, kE5m2>(s_packs[p], rg, args, dzr, p);
    }

    unsigned mine = 0;
#pragma unroll
    for (int q = 0; q < kTargetSlots / 4; ++q) {
      const int4 owners = reinterpret_cast<const int4*>(slots.owner)[q];
      mine |= (owners.x == tid ? 1u : 0u) << (4 * q) | (owners.y == tid ? 1u : 0u) << (4 * q + 1) |
              (owners.z == tid ? 1u : 0u) << (4 * q + 2) | (owners.w == tid ? 1u : 0u) << (4 * q + 3);
    }
    while (mine != 0) {
      const int slot = __ffs(static_cast<int>(mine)) - 1;
      mine &= mine - 1;
      const int col = slots.col[slot];
      const A s = to_acc<A>(s_elems[col]);  // in this thread's own pack
      A correction = 0;
#pragma unroll
      for (int j = 0; j < kTargetSlots; ++j) {
        if (slots.col[j] == col) correction -= A(slots.weight[j]);  // duplicates: every prediction of col counts
      }
      const A g = element_gradient<A, kE5m2>(s, correction, rg, args);
      if constexpr (kE5m2) {
        dzr[col] = float_to_fp8_device<true>(static_cast<float>(g));
      } else {
        dzr[col] = from_acc<T>(g);
      }
      row_terms[t * kTermStride + slot] = static_cast<double>(A(slots.weight[slot]) * (lse - A(kSoftcap) * s));
    }
  }
}

unsigned row_grid(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)); }

LossArgs make_loss_args(const TrainLossConfig& config) {
  GPT_CHECK(config.mtp_weights.size() <= static_cast<size_t>(kMaxMtp), "softcap_train_loss: at most ", kMaxMtp,
            " mtp_weights on CUDA, got ", config.mtp_weights.size());
  LossArgs args;
  args.n_mtp = static_cast<int>(config.mtp_weights.size());
  for (int k = 0; k < args.n_mtp; ++k) args.mtp[k] = config.mtp_weights[static_cast<size_t>(k)];
  args.prefix_weight = config.prefix_weight;
  args.loss_scale = config.loss_scale;
  args.grad_scale = config.grad_scale;
  return args;
}

// Dynamic shared memory a v2 block may use on the current device (the opt-in maximum less its static arrays).
int64_t v2_row_bytes_limit() {
  int device = 0, optin = 0;
  GPT_CUDA_CHECK(cudaGetDevice(&device));
  GPT_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  constexpr int64_t kStaticBytes = 2 * sizeof(TargetSlots) + 32 * sizeof(double);
  return static_cast<int64_t>(optin) - kStaticBytes;
}

}  // namespace

bool softcap_train_v2_supports(const Tensor& z_raw, const Tensor& dz_raw) {
  if (z_raw.ndim() != 2 || !is_floating(z_raw.dtype())) return false;
  const auto elem = static_cast<int64_t>(dtype_size(z_raw.dtype()));
  const int64_t vocab = z_raw.size(1);
  if (vocab <= 0 || vocab % (16 / elem) != 0 || vocab > INT_MAX) return false;
  if (!aligned16(z_raw.raw()) || !aligned16(dz_raw.raw())) return false;
  return vocab * elem <= v2_row_bytes_limit();
}

void softcap_train_loss_v2(const Tensor& z_raw, const Tensor& targets, const Tensor& prefix_table,
                           const TrainLossConfig& config, Tensor& loss, Tensor& dz_raw) {
  GPT_CHECK(softcap_train_v2_supports(z_raw, dz_raw), "softcap_train_loss_v2: unsupported logits ", z_raw.describe(),
            " / gradient ", dz_raw.describe(), " (see softcap_train_v2_supports)");
  const int64_t rows = z_raw.size(0), vocab = z_raw.size(1);
  const LossArgs args = make_loss_args(config);
  const bool e5m2 = dz_raw.dtype() == DType::e5m2;
  const int64_t* prefix = prefix_table.defined() ? device_ptr<int64_t>(prefix_table) : nullptr;
  DeviceScratch row_terms(static_cast<size_t>(std::max<int64_t>(rows, 1)) * kTermStride * sizeof(double),
                          kLegacyDefaultStream);
  dispatch_floating_cuda(z_raw.dtype(), "softcap_train_loss_v2", [&]<typename T, typename A>() {
    if (rows > 0) {
      constexpr int kVec = kVec16<T>;
      const size_t row_bytes = static_cast<size_t>(vocab) * sizeof(T);
      auto launch = [&]<bool kE5m2>() {
        auto* kernel = softcap_train_kernel_v2<T, A, kVec, kE5m2>;
        GPT_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(row_bytes)));
        GPT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                            cudaSharedmemCarveoutMaxShared));
        kernel<<<row_grid(rows), kThreadsV2, row_bytes>>>(device_ptr<T>(z_raw), device_ptr<int64_t>(targets), prefix,
                                                          args, rows, static_cast<int>(vocab),
                                                          const_cast<void*>(dz_raw.raw()), row_terms.as<double>());
      };
      if (e5m2) {
        launch.template operator()<true>();
      } else {
        launch.template operator()<false>();
      }
      GPT_CUDA_CHECK_LAUNCH();
    }
    sum_rows_kernel<A><<<1, 1024>>>(row_terms.as<double>(), rows, kTermStride, static_cast<double>(config.loss_scale),
                                    false, device_ptr<A>(loss));
    GPT_CUDA_CHECK_LAUNCH();
  });
}

void softcap_train_loss_v1(const Tensor& z_raw, const Tensor& targets, const Tensor& prefix_table,
                           const TrainLossConfig& config, Tensor& loss, Tensor& dz_raw) {
  const int64_t rows = z_raw.size(0), vocab = z_raw.size(1);
  const LossArgs args = make_loss_args(config);
  const bool e5m2 = dz_raw.dtype() == DType::e5m2;
  const int64_t* prefix = prefix_table.defined() ? device_ptr<int64_t>(prefix_table) : nullptr;
  DeviceScratch row_loss(static_cast<size_t>(std::max<int64_t>(rows, 1)) * sizeof(double), kLegacyDefaultStream);
  dispatch_floating_cuda(z_raw.dtype(), "softcap_train_loss", [&]<typename T, typename A>() {
    if (rows > 0) {
      constexpr int kVec = kVec16<T>;
      const bool packed = vocab % kVec == 0 && aligned16(z_raw.raw()) && aligned16(dz_raw.raw());
      auto launch = [&]<int VEC, bool kE5m2>() {
        softcap_train_kernel_v1<T, A, VEC, kE5m2>
            <<<row_grid(rows), kThreads>>>(device_ptr<T>(z_raw), device_ptr<int64_t>(targets), prefix, args, rows,
                                           vocab, const_cast<void*>(dz_raw.raw()), row_loss.as<double>());
      };
      launch_packed_fp8<kVec>(packed, e5m2, launch);
      GPT_CUDA_CHECK_LAUNCH();
    }
    sum_rows_kernel<A><<<1, 1024>>>(row_loss.as<double>(), rows, 1, static_cast<double>(config.loss_scale), false,
                                    device_ptr<A>(loss));
    GPT_CUDA_CHECK_LAUNCH();
  });
}

void softcap_train_loss(const Tensor& z_raw, const Tensor& targets, const Tensor& prefix_table,
                        const TrainLossConfig& config, Tensor& loss, Tensor& dz_raw) {
  if (softcap_train_v2_supports(z_raw, dz_raw)) {
    softcap_train_loss_v2(z_raw, targets, prefix_table, config, loss, dz_raw);
  } else {
    softcap_train_loss_v1(z_raw, targets, prefix_table, config, loss, dz_raw);
  }
}

void validation_loss_rows_add(const Tensor& z_raw, const Tensor& targets, Tensor& loss_sum) {
  const int64_t rows = z_raw.size(0), vocab = z_raw.size(1);
  if (rows == 0) return;
  DeviceScratch row_loss(static_cast<size_t>(rows) * sizeof(double), kLegacyDefaultStream);
  dispatch_floating_cuda(z_raw.dtype(), "validation_loss_rows_add", [&]<typename T, typename A>() {
    launch_validation_rows<T, A, false>(device_ptr<T>(z_raw), device_ptr<int64_t>(targets), rows, vocab,
                                        CanonicalMaskRows{}, row_loss.as<double>(), kLegacyDefaultStream);
    sum_rows_kernel<A><<<1, 1024>>>(row_loss.as<double>(), rows, 1, 1.0, true, device_ptr<A>(loss_sum));
    GPT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpt::cuda
