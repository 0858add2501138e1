// CPU reference of kernels/masked_validation_loss.h. The per-row arithmetic is that of cpu::validation_loss_rows_add
// (kernels/cpu/softcap_loss.cpp) with the masked columns overwritten, so an all-zero mask gives bitwise its result.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/masked_validation_loss.h"
#include "kernels/softcap_loss.h"

namespace gpt::cpu {

namespace {

constexpr int64_t kParallelMinRows = 64;

template <typename A>
A log_sum_exp(const A* z, int64_t n) {
  const A m = *std::max_element(z, z + n);
  A sum = 0;
  for (int64_t v = 0; v < n; ++v) sum += std::exp(z[v] - m);
  return m + std::log(sum);
}

}  // namespace

void masked_validation_loss_rows_add(const Tensor& z_raw, const Tensor& inputs, const Tensor& targets,
                                     const Tensor& mask, Tensor& loss_sum) {
  const int64_t rows = z_raw.size(0), vocab = z_raw.size(1);
  const int64_t mask_rows = mask.size(0), row_bytes = mask.size(1);
  const int64_t* y = targets.data<int64_t>();
  const int32_t* x = inputs.data<int32_t>();
  for (int64_t t = 0; t < rows; ++t) {
    GPT_CHECK(y[t] >= 0 && y[t] < vocab, "masked_validation_loss: target ", y[t], " at ", t, " is outside [0, ", vocab,
              ")");
    GPT_CHECK(x[t] >= 0 && x[t] < mask_rows, "masked_validation_loss: input ", x[t], " at ", t,
              " has no mask row (mask rows: ", mask_rows, ")");
  }
  const auto* bits = static_cast<const uint8_t*>(mask.raw());
  dispatch_floating(z_raw.dtype(), "masked_validation_loss", [&]<typename T>() {
    using A = acc_t<T>;
    const T* zp = z_raw.data<T>();
    std::vector<double> row_loss(static_cast<size_t>(rows), 0.0);
#pragma omp parallel if (rows >= kParallelMinRows)
    {
      std::vector<A> z(static_cast<size_t>(vocab));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < rows; ++t) {
        for (int64_t v = 0; v < vocab; ++v) {
          const A a = (load(zp[t * vocab + v]) + A(kSoftcapShift)) / A(kSoftcapDivisor);
          z[v] = A(kSoftcap) / (A(1) + std::exp(-a));  // fp32, s not rounded (§3.4)
        }
        const uint8_t* row = bits + x[t] * row_bytes;
        for (int64_t byte = 0; byte * 8 < vocab; ++byte) {
          if (row[byte] == 0) continue;
          for (int64_t v = byte * 8; v < std::min(vocab, byte * 8 + 8); ++v) {
            if ((row[byte] >> (v & 7)) & 1) z[v] = A(kMaskedLogit);
          }
        }
        row_loss[static_cast<size_t>(t)] = static_cast<double>(log_sum_exp(z.data(), vocab) - z[y[t]]);
      }
    }
    double total = 0.0;
    for (double l : row_loss) total += l;
    A* out = loss_sum.data<A>();
    out[0] = static_cast<A>(static_cast<double>(out[0]) + total);
  });
}

}  // namespace gpt::cpu
