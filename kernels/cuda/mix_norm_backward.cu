// CUDA mix_rmsnorm_backward (kernels/elementwise.h): mix_backward v3's one-pass kernel (kernels/cuda/mix_rows.cuh)
// with its dout formed in registers from the norm's gradient, instead of rmsnorm_backward writing dout to memory
// and the mix reading it back. Per row: Σ dy·x in rmsnorm_backward_kernel's lane order (scalar loads, lane l adds
// i = l, l + 32, …, then warp_sum), then per 16-byte pack dout = bf16(old + r·dy − c·x) by the same device helpers
// (rms_backward.cuh), so dout, and with it every result of the mix, has the bits of the two ops. The second read
// of the row's dy and x (the packs, after the scalar dot) comes from L1/L2: from memory the kernel reads dy, x and
// old once and never writes dout, two of the five full-row passes of the two kernels (kernels/cuda/NOTES.md).
#include <cuda_bf16.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/rms_backward.cuh"
#include "kernels/cuda/mix_rows.cuh"
#include "kernels/cuda/mix_variants.h"
#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"

namespace gpt::cuda {

using namespace mix_rows;

namespace {

// dout = old + J_norm^T dy of the row (old null: none), the Dout of mix_backward_rows_kernel.
template <typename T, typename A>
struct NormedDout {
  const T* dy;
  const T* x;  // the norm's input: the mix's output
  const A* rstd;
  const T* old;
  struct Row {
    A rstd, coefficient;
  };
  __device__ __forceinline__ Row row(int64_t row, int n, int lane) const {
    const A dot = warp_row_dot<A>(dy + row * n, x + row * n, n, lane);
    const A r = rstd[row];
    return {r, rms_backward_coefficient(r, dot, n)};
  }
  __device__ __forceinline__ Pack<T, kVec16<T>> pack(const Row& r, int64_t at) const {
    constexpr int VEC = kVec16<T>;
    const Pack<T, VEC> dyv = load_pack<T, VEC>(dy + at), xv = load_pack<T, VEC>(x + at);
    Pack<T, VEC> d;
    if (old != nullptr) d = load_pack<T, VEC>(old + at);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const A o = old != nullptr ? to_acc<A>(d.v[j]) : A(0);
      d.v[j] = from_acc<T>(rms_backward_element(o, to_acc<A>(dyv.v[j]), to_acc<A>(xv.v[j]), r.rstd, r.coefficient));
    }
    return d;
  }
};

// Two blocks of 8 warps per SM, as v3 has for the four-term residual mixes: left to itself the compiler gives the
// fused four-term kernel 133 registers (one block per SM); capped it takes 128 without spills (sm_90a, ptxas -v;
// five terms spill 8 bytes).
constexpr int kFusedMinBlocks = 2;

// The two ops (any dtype, shape or aliasing): rmsnorm_backward into a temporary, then mix_backward.
void unfused(const Tensor* dout_old, const Tensor& dy, const Tensor& x, const Tensor& rstd,
             std::span<const MixTerm> terms, std::span<const MixGrad> grads) {
  Tensor dout = Tensor::empty(x.shape(), x.dtype(), Device::cuda);
  if (dout_old != nullptr) dout.copy_from(*dout_old);
  cuda::rmsnorm_backward(dy, x, rstd, dout, dout_old != nullptr ? GradWrite::add : GradWrite::overwrite);
  cuda::mix_backward(dout, terms, grads);
}

}  // namespace

void mix_rmsnorm_backward(const Tensor* dout_old, const Tensor& dy, const Tensor& x, const Tensor& rstd,
                          std::span<const MixTerm> terms, std::span<const MixGrad> grads) {
  using T = __nv_bfloat16;  // the one-pass kernel's only instantiation
  using A = float;
  const Tensor* old = dout_old != nullptr && dout_old->defined() ? dout_old : nullptr;
  const int64_t rows = x.size(0), n = x.numel() / rows;
  MixArgs args = pack_terms(terms, "mix_rmsnorm_backward");
  const bool any_scalar_grad = pack_grads(args, grads);
  // The kernel reads dy and x for the whole row before it writes the row's dx packs, and a pack of old just before
  // writing the dx packs at the same place: a dx may be old (mix_backward's dout rule), never dy or x.
  bool dx_reads_back = false;
  for (int k = 0; k < args.n_terms; ++k) {
    dx_reads_back = dx_reads_back || args.t[k].dx == dy.raw() || args.t[k].dx == x.raw();
  }
  const bool fusable = x.dtype() == DType::bf16 && mix_backward_in_use() == 3 && x.size(-1) == n &&
                       n <= (int64_t{1} << 30) && !dx_reads_back && can_pack<T>(args, n, x.raw()) &&
                       aligned16(dy.raw()) && (old == nullptr || aligned16(old->raw()));
  const int row_terms = fusable ? row_terms_for(args, true) : 0;
  if (row_terms == 0) {
    unfused(old, dy, x, rstd, terms, grads);
    return;
  }
  DeviceScratch partial(any_scalar_grad ? static_cast<size_t>(rows) * args.n_terms * sizeof(double) : 0,
                        kLegacyDefaultStream);
  double* partial_ptr = partial.as<double>();
  const NormedDout<T, A> dout{device_ptr<T>(dy), device_ptr<T>(x), device_ptr<A>(rstd),
                              old != nullptr ? device_ptr<T>(*old) : nullptr};
  const int packs = static_cast<int>(n / kVec16<T>);
  with_row_terms(row_terms, [&](auto nt) {
    mix_backward_rows_kernel<T, A, decltype(nt)::value, kFusedMinBlocks>
        <<<row_blocks(rows), kWarps * 32>>>(args, dout, rows, packs, partial_ptr);
  });
  GPT_CUDA_CHECK_LAUNCH();
  if (!any_scalar_grad) return;
  mix_scalar_grad_kernel<T, A><<<args.n_terms, kScalarGradThreads>>>(args, partial_ptr, rows);
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
