// CPU reference of kernels/transpose.h (tiled so both sides stay in cache).
#include <algorithm>

#include "kernels/cpu/dispatch.h"
#include "kernels/transpose.h"

namespace gpt::cpu {

namespace {
template <bool Accumulate>
void transpose_impl(const Tensor& src, Tensor& dst, const char* op) {
  const int64_t rows = src.size(0), cols = src.size(1);
  constexpr int64_t kTile = 32;
  dispatch_floating(src.dtype(), op, [&]<typename T>() {
    const T* s = src.data<T>();
    T* d = dst.data<T>();
#pragma omp parallel for schedule(static)
    for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
      for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
        for (int64_t i = i0; i < std::min(rows, i0 + kTile); ++i) {
          for (int64_t j = j0; j < std::min(cols, j0 + kTile); ++j) {
            if constexpr (Accumulate) {
              d[j * rows + i] = store<T>(load(d[j * rows + i]) + load(s[i * cols + j]));
            } else {
              d[j * rows + i] = s[i * cols + j];
            }
          }
        }
      }
    }
  });
}
}  // namespace

void transpose(const Tensor& src, Tensor& dst) { transpose_impl<false>(src, dst, "transpose"); }
void add_transposed(const Tensor& src, Tensor& dst) { transpose_impl<true>(src, dst, "add_transposed"); }

}  // namespace gpt::cpu
