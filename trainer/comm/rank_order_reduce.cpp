#include "trainer/comm/rank_order_reduce.h"

#include <algorithm>
#include <type_traits>

#include "base/check.h"
#include "trainer/comm/comm.h"

namespace gpt {

namespace {

// Reduces element range [begin, end) of every rank's buffer (rank order) into out (which may alias a buffer
// only when the caller has made sure nobody reads that range concurrently).
template <typename T>
void reduce_range(const std::vector<const void*>& bufs, int64_t begin, int64_t end, ReduceOp op, void* out) {
  using A = std::conditional_t<std::is_same_v<T, double> || std::is_same_v<T, int64_t>, double, float>;
  const int world = static_cast<int>(bufs.size());
  T* o = static_cast<T*>(out);
  for (int64_t i = begin; i < end; ++i) {
    auto value = [&](int q) {
      const T& x = static_cast<const T*>(bufs[static_cast<size_t>(q)])[i];
      if constexpr (std::is_same_v<T, bf16>) {
        return static_cast<float>(x);
      } else {
        return x;
      }
    };
    if constexpr (std::is_integral_v<T>) {
      T acc = value(0);
      for (int q = 1; q < world; ++q)
        acc = op == ReduceOp::max ? std::max(acc, value(q)) : static_cast<T>(acc + value(q));
      if (op == ReduceOp::avg) acc = static_cast<T>(acc / world);
      o[i - begin] = acc;
    } else {
      A acc = static_cast<A>(value(0));
      for (int q = 1; q < world; ++q) {
        const A v = static_cast<A>(value(q));
        acc = op == ReduceOp::max ? std::max(acc, v) : acc + v;
      }
      if (op == ReduceOp::avg) acc /= static_cast<A>(world);
      if constexpr (std::is_same_v<T, bf16>) {
        o[i - begin] = bf16(static_cast<float>(acc));
      } else {
        o[i - begin] = static_cast<T>(acc);
      }
    }
  }
}

}  // namespace

void reduce_in_rank_order(DType dtype, const std::vector<const void*>& bufs, int64_t begin, int64_t end, ReduceOp op,
                          void* out) {
  switch (dtype) {
    case DType::f64:
      reduce_range<double>(bufs, begin, end, op, out);
      return;
    case DType::f32:
      reduce_range<float>(bufs, begin, end, op, out);
      return;
    case DType::bf16:
      reduce_range<bf16>(bufs, begin, end, op, out);
      return;
    case DType::i32:
      reduce_range<int32_t>(bufs, begin, end, op, out);
      return;
    case DType::i64:
      reduce_range<int64_t>(bufs, begin, end, op, out);
      return;
    default:
      GPT_FAIL("collective reduction: unsupported dtype ", dtype_name(dtype));
  }
}

}  // namespace gpt
