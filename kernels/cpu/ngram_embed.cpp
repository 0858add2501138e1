// CPU reference of kernels/ngram_embed.h.
#include <algorithm>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/row_groups.h"
#include "kernels/ngram_embed.h"

namespace gpt::cpu {

void ngram_embed_forward(const Tensor& table, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                         Tensor& out) {
  const int64_t d = out.size(1), n = out.size(0);
  const int32_t* r = rows.data<int32_t>();
  const int32_t* s = sign_rows.data<int32_t>();
  check_row_ids(r, 2 * n, table.size(0), "ngram_embed_forward: rows");
  check_row_ids(s, 2 * n, pool.size(0), "ngram_embed_forward: sign_rows");
  dispatch_floating(out.dtype(), "ngram_embed_forward", [&]<typename T>() {
    const T* tp = table.data<T>();
    const T* pp = pool.data<T>();
    T* op = out.data<T>();
#pragma omp parallel for schedule(static) if (n * d > (1 << 15))
    for (int64_t t = 0; t < n; ++t) {
      const T* bigram = tp + static_cast<int64_t>(r[t]) * d;
      const T* trigram = tp + static_cast<int64_t>(r[n + t]) * d;
      const T* bigram_sign = pp + static_cast<int64_t>(s[t]) * d;
      const T* trigram_sign = pp + static_cast<int64_t>(s[n + t]) * d;
      for (int64_t c = 0; c < d; ++c) {
        const acc_t<T> sum = load(bigram[c]) * load(bigram_sign[c]) + load(trigram[c]) * load(trigram_sign[c]);
        op[t * d + c] = store<T>(sum);
      }
    }
  });
}

void ngram_embed_backward(const Tensor& dout, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                          Tensor& row_grad) {
  const int64_t d = dout.size(1), n = dout.size(0);
  const int32_t* r = rows.data<int32_t>();
  const int32_t* s = sign_rows.data<int32_t>();
  check_row_ids(r, 2 * n, row_grad.size(0), "ngram_embed_backward: rows");
  check_row_ids(s, 2 * n, pool.size(0), "ngram_embed_backward: sign_rows");
  const RowGroups groups = group_by_row(r, 2 * n);  // entries of a row in increasing j
  const auto n_groups = static_cast<int64_t>(groups.starts.size()) - 1;
  dispatch_floating(dout.dtype(), "ngram_embed_backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* gp = dout.data<T>();
    const T* pp = pool.data<T>();
    A* dst_base = row_grad.data<A>();
#pragma omp parallel if (n * d > (1 << 15))
    {
      std::vector<A> sum(static_cast<size_t>(d));
#pragma omp for schedule(dynamic, 16)
      for (int64_t g = 0; g < n_groups; ++g) {
        std::fill(sum.begin(), sum.end(), A(0));
        for (int64_t i = groups.starts[g]; i < groups.starts[g + 1]; ++i) {
          const int64_t j = groups.order[i];
          const T* grad = gp + (j % n) * d;
          const T* sign = pp + static_cast<int64_t>(s[j]) * d;
          for (int64_t c = 0; c < d; ++c) sum[c] += load(grad[c]) * load(sign[c]);
        }
        A* dst = dst_base + static_cast<int64_t>(r[groups.order[groups.starts[g]]]) * d;
        for (int64_t c = 0; c < d; ++c) dst[c] += sum[c];
      }
    }
  });
}

}  // namespace gpt::cpu
