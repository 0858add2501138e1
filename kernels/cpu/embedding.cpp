// CPU reference of kernels/embedding.h.
#include <algorithm>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/row_groups.h"
#include "kernels/embedding.h"

namespace gpt::cpu {

void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  const int64_t rows = table.size(0), d = table.size(1), n = ids.numel();
  const int32_t* id = ids.data<int32_t>();
  check_row_ids(id, n, rows, "embedding_forward: ids");
  dispatch_floating(table.dtype(), "embedding_forward", [&]<typename T>() {
    const T* tp = table.data<T>();
    T* op = out.data<T>();
#pragma omp parallel for schedule(static) if (n * d > (1 << 15))
    for (int64_t t = 0; t < n; ++t) std::copy_n(tp + static_cast<int64_t>(id[t]) * d, d, op + t * d);
  });
}

void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  const int64_t rows = dtable.size(0), d = dtable.size(1), n = ids.numel();
  const int32_t* id = ids.data<int32_t>();
  check_row_ids(id, n, rows, "embedding_backward: ids");
  const RowGroups groups = group_by_row(id, n);
  const int64_t n_groups = static_cast<int64_t>(groups.starts.size()) - 1;
  dispatch_floating(dtable.dtype(), "embedding_backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* gp = dout.data<T>();
    T* tp = dtable.data<T>();
#pragma omp parallel if (n * d > (1 << 15))
    {
      std::vector<A> sum(static_cast<size_t>(d));
#pragma omp for schedule(dynamic, 16)
      for (int64_t g = 0; g < n_groups; ++g) {
        std::fill(sum.begin(), sum.end(), A(0));
        for (int64_t i = groups.starts[g]; i < groups.starts[g + 1]; ++i) {
          const T* src = gp + groups.order[i] * d;
          for (int64_t c = 0; c < d; ++c) sum[c] += load(src[c]);
        }
        T* dst = tp + static_cast<int64_t>(id[groups.order[groups.starts[g]]]) * d;
        for (int64_t c = 0; c < d; ++c) dst[c] = store<T>(load(dst[c]) + sum[c]);
      }
    }
  });
}

}  // namespace gpt::cpu
