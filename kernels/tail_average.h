#pragma once
// Elementwise ops of the tail averages (RECIPE §S.5), over one contiguous tensor or a leading-dimension slice of
// one (a rank's shard):
//
//   tail_accumulate:  seed: acc ← w;  else acc ← acc + rate·(w − acc)   (acc: stat_dtype(w), i.e. f32; f64 for f64)
//   tail_ship:        w ← w + factor·(acc − w), rounded once to w's dtype; factor = 1 stores acc rounded (w ← acc)
//   sum_of_squares:   Σ w², accumulated in double in index order (the Frobenius norm's square, deterministic)
//   scale_in_place:   w ← w·factor, rounded once to w's dtype
//
// Arithmetic runs in fp32 (double for f64 tensors); `rate` and `factor` are rounded to that type once.
// Both backends: the CUDA elementwise ops give the CPU's bits; the CUDA sum_of_squares sums in another fixed order
// (kernels/cuda/tail_average.cu) and waits for the device (it returns a host double).
#include "kernels/tensor.h"

namespace gpt {

void tail_accumulate(Tensor& acc, const Tensor& w, double rate, bool seed);
void tail_ship(Tensor& w, const Tensor& acc, double factor);
double sum_of_squares(const Tensor& w);
void scale_in_place(Tensor& w, double factor);

// The backends write the sum into `sum` (GPT_BACKEND_CALL passes no result back).
namespace cpu {
void tail_accumulate(Tensor& acc, const Tensor& w, double rate, bool seed);
void tail_ship(Tensor& w, const Tensor& acc, double factor);
void sum_of_squares(const Tensor& w, double& sum);
void scale_in_place(Tensor& w, double factor);
}  // namespace cpu
namespace cuda {
void tail_accumulate(Tensor& acc, const Tensor& w, double rate, bool seed);
void tail_ship(Tensor& w, const Tensor& acc, double factor);
void sum_of_squares(const Tensor& w, double& sum);
void scale_in_place(Tensor& w, double factor);
}  // namespace cuda

}  // namespace gpt
