#pragma once
// The validation row losses of RECIPE §3.4 on CUDA, shared by validation_loss (kernels/cuda/softcap_loss.cu) and the
// masked loss of the final validation (§S.6, kernels/cuda/masked_validation_loss.cu), so that an all-zero mask gives
// the unmasked loss bit for bit. One block per row; s is not rounded, math in A with exact exponentials, and the sum
// of exp(z − 23) needs no running max (z = 23·s ∈ [0, 23]; a masked z = −60 adds e^−83, a normal fp32 number).
// Row losses go to a scratch array that sum_rows_kernel adds in row order (deterministic).
#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/masked_validation_loss.h"
#include "kernels/softcap_loss.h"

namespace gpt::cuda {

inline constexpr int kValidationThreads = 1024;

inline unsigned validation_row_grid(int64_t rows) { return static_cast<unsigned>(rows < (1 << 20) ? rows : 1 << 20); }

// The §S.6 canonical mask on the device: row inputs[t] of `bits` (row_bytes per row) masks row t's columns.
struct CanonicalMaskRows {
  const uint8_t* bits = nullptr;
  const int32_t* inputs = nullptr;
  int64_t mask_rows = 0;
  int64_t row_bytes = 0;
};

// Bit `col` of a mask row (byte col/8, bit col mod 8); a null row masks nothing.
__device__ __forceinline__ bool masked_column(const uint8_t* mask_row, int64_t col) {
  return mask_row != nullptr && ((mask_row[col >> 3] >> (col & 7)) & 1) != 0;
}

template <typename A, typename T>
__device__ __forceinline__ A validation_z(T raw) {
  const A a = (to_acc<A>(raw) + A(kSoftcapShift)) / A(kSoftcapDivisor);
  return A(kSoftcap) / (A(1) + exp(-a));
}

// row_loss[t] = lse(z_t) − z_t,y[t]. kMasked: columns whose bit is set in the row's mask row have z = −60 (§S.6),
// and a row whose input has no mask row or whose target is outside [0, V) gets NaN (bad input, an error on the CPU).
template <typename T, typename A, int VEC, bool kMasked>
__global__ void __launch_bounds__(kValidationThreads)
    validation_rows_kernel(const T* __restrict__ z_raw, const int64_t* __restrict__ targets, int64_t rows,
                           int64_t vocab, CanonicalMaskRows mask, double* __restrict__ row_loss) {
  __shared__ A shared32[32];
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    const T* zr = z_raw + t * vocab;
    const uint8_t* mask_row = nullptr;  // null: no column of this row is masked
    bool valid = true;
    if constexpr (kMasked) {
      const int32_t x = mask.inputs[t];
      valid = x >= 0 && x < mask.mask_rows && targets[t] >= 0 && targets[t] < vocab;
      if (valid) mask_row = mask.bits + static_cast<int64_t>(x) * mask.row_bytes;
    }
    A sum = 0;
    for (int64_t p = threadIdx.x; p < vocab / VEC; p += kValidationThreads) {
      const Pack<T, VEC> v = load_pack<T, VEC>(zr + p * VEC);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        A z = validation_z<A>(v.v[j]);
        if constexpr (kMasked) {
          if (masked_column(mask_row, p * VEC + j)) z = A(kMaskedLogit);
        }
        sum += exp(z - A(kSoftcap));
      }
    }
    const A lse = A(kSoftcap) + log(block_sum(sum, shared32));
    if (threadIdx.x == 0) {
      if (valid) {
        const int64_t y = targets[t];
        A z_target = validation_z<A>(zr[y]);
        if constexpr (kMasked) {
          if (masked_column(mask_row, y)) z_target = A(kMaskedLogit);
        }
        row_loss[t] = static_cast<double>(lse - z_target);
      } else {
        row_loss[t] = NAN;
      }
    }
  }
}

// Launches validation_rows_kernel over z_raw [rows, vocab] (16-byte packs where the rows allow).
template <typename T, typename A, bool kMasked>
void launch_validation_rows(const T* z_raw, const int64_t* targets, int64_t rows, int64_t vocab,
                            const CanonicalMaskRows& mask, double* row_loss, cudaStream_t stream) {
  constexpr int kVec = kVec16<T>;
  if (vocab % kVec == 0 && aligned16(z_raw)) {
    validation_rows_kernel<T, A, kVec, kMasked>
        <<<validation_row_grid(rows), kValidationThreads, 0, stream>>>(z_raw, targets, rows, vocab, mask, row_loss);
  } else {
    validation_rows_kernel<T, A, 1, kMasked>
        <<<validation_row_grid(rows), kValidationThreads, 0, stream>>>(z_raw, targets, rows, vocab, mask, row_loss);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

// out[0] = Σ row_loss · factor (overwrite) or out[0] += Σ row_loss (accumulate); one block, fixed order. A row's
// loss is the sum of its terms_per_row consecutive entries, in order.
template <typename A>
__global__ void sum_rows_kernel(const double* row_loss, int64_t rows, int terms_per_row, double factor, bool accumulate,
                                A* out) {
  __shared__ double shared32[32];
  double sum = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    double row = 0.0;
    for (int i = 0; i < terms_per_row; ++i) row += row_loss[r * terms_per_row + i];
    sum += row;
  }
  sum = block_sum(sum, shared32);
  if (threadIdx.x == 0) {
    out[0] = accumulate ? static_cast<A>(static_cast<double>(out[0]) + sum) : static_cast<A>(sum * factor);
  }
}

}  // namespace gpt::cuda
