// CPU reference of kernels/bigram.h.
#include <algorithm>
#include <vector>

#include "kernels/bigram.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/row_groups.h"

namespace gpt::cpu {

void bigram_forward(const Tensor& embed, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids, Tensor& out) {
  const int64_t d = embed.size(1), n = ids.size(0);
  const int32_t* h = ids.data<int32_t>();
  const int32_t* s = sign_ids.data<int32_t>();
  check_row_ids(h, n, embed.size(0), "bigram_forward: ids");
  check_row_ids(s, n, sign.size(0), "bigram_forward: sign_ids");
  dispatch_floating(embed.dtype(), "bigram_forward", [&]<typename T>() {
    const T* ep = embed.data<T>();
    const T* sp = sign.data<T>();
    T* op = out.data<T>();
#pragma omp parallel for schedule(static) if (n * d > (1 << 15))
    for (int64_t t = 0; t < n; ++t) {
      const T* er = ep + static_cast<int64_t>(h[t]) * d;
      const T* sr = sp + static_cast<int64_t>(s[t]) * d;
      for (int64_t c = 0; c < d; ++c) op[t * d + c] = store<T>(load(er[c]) * load(sr[c]));
    }
  });
}

void bigram_backward(const Tensor& dout, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids,
                     Tensor& dembed) {
  const int64_t d = dembed.size(1), n = ids.size(0);
  const int32_t* h = ids.data<int32_t>();
  const int32_t* s = sign_ids.data<int32_t>();
  check_row_ids(h, n, dembed.size(0), "bigram_backward: ids");
  check_row_ids(s, n, sign.size(0), "bigram_backward: sign_ids");
  const RowGroups groups = group_by_row(h, n);
  const int64_t n_groups = static_cast<int64_t>(groups.starts.size()) - 1;
  dispatch_floating(dembed.dtype(), "bigram_backward", [&]<typename T>() {
    using A = acc_t<T>;
    const T* gp = dout.data<T>();
    const T* sp = sign.data<T>();
    T* ep = dembed.data<T>();
#pragma omp parallel if (n * d > (1 << 15))
    {
      std::vector<A> sum(static_cast<size_t>(d));
#pragma omp for schedule(dynamic, 16)
      for (int64_t g = 0; g < n_groups; ++g) {
        std::fill(sum.begin(), sum.end(), A(0));
        for (int64_t i = groups.starts[g]; i < groups.starts[g + 1]; ++i) {
          const int64_t t = groups.order[i];
          const T* sr = sp + static_cast<int64_t>(s[t]) * d;
          for (int64_t c = 0; c < d; ++c) sum[c] += load(gp[t * d + c]) * load(sr[c]);
        }
        T* dst = ep + static_cast<int64_t>(h[groups.order[groups.starts[g]]]) * d;
        for (int64_t c = 0; c < d; ++c) dst[c] = store<T>(load(dst[c]) + sum[c]);
      }
    }
  });
}

}  // namespace gpt::cpu
