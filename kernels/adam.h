#pragma once
// Fused Adam update with cautious weight decay (RECIPE §4.5) over one contiguous tensor (or a leading-dimension
// slice of one: a rank's shard of rows). Per element, with k = args.step (the parameter's own update counter):
//
//   m ← β1·m + (1−β1)·g;   v ← β2·v + (1−β2)·g²
//   u = m / (sqrt(v) + eps) · lr·sqrt(1−β2^k)/(1−β1^k)
//   u ← u + [u·p > 0]·(lr²·wd)·p
//   p ← p − u            (in p's dtype: bf16(p − u) for bf16, no mantissa tracking)
//
// The two scalar factors are formed in double on the host; the element math runs in fp32 (double for f64
// tensors, the exact path of the tests).
#include "kernels/tensor.h"

namespace gpt {

struct AdamArgs {
  double lr = 0;  // lr_e = base_lr·η(s)·lr_mul
  double beta1 = 0.9, beta2 = 0.99;
  double eps = 1e-10;
  double weight_decay = 0;  // wd·wd_mul
  int64_t step = 1;         // k ≥ 1
};

// Scalars the kernels read (one host computation for both backends).
struct AdamCoefficients {
  double beta1, beta2, eps;
  double step_size;  // lr·sqrt(1−β2^k)/(1−β1^k)
  double decay;      // lr²·wd
};
AdamCoefficients adam_coefficients(const AdamArgs& args);

// param: any floating dtype and shape; grad: same shape and dtype; m, v: same shape, stat_dtype(param)
// (f32, or f64 for f64 params). Updates param, m and v in place.
void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamArgs& args);

namespace cpu {
void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamCoefficients& c);
}
namespace cuda {
void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamCoefficients& c);
}

}  // namespace gpt
