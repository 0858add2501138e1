// Kernel ladder, forward v7–v11 (kernels/cuda/ladder/attention_versions.h): the superseded configurations of the
// production kernel template attention/forward.cuh (v12 and v13 are the production ones).
#include "kernels/cuda/attention/forward.cuh"
#include "kernels/cuda/ladder/attention_versions.h"

namespace gpt::cuda {

namespace {

constexpr ForwardOptions kV7{.consumers = 2, .take_turns = true};
constexpr ForwardOptions kV8{.consumers = 3, .take_turns = true};
constexpr ForwardOptions kV9{.consumers = 3, .persistent = true, .take_turns = true};
constexpr ForwardOptions kV10{.consumers = 3, .lazy_rescale = true, .take_turns = true};
constexpr ForwardOptions kV11{.consumers = 3, .persistent = true, .lazy_rescale = true, .take_turns = true};

}  // namespace

namespace ladder {

void attention_forward_v7(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale) {
  launch_forward<kV7>(q, k, v, cu_seqlens, y, lse, window, scale);
}

void attention_forward_v8(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale) {
  launch_forward<kV8>(q, k, v, cu_seqlens, y, lse, window, scale);
}

void attention_forward_v9(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                          Tensor& lse, int64_t window, float scale) {
  launch_forward<kV9>(q, k, v, cu_seqlens, y, lse, window, scale);
}

void attention_forward_v10(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                           Tensor& lse, int64_t window, float scale) {
  launch_forward<kV10>(q, k, v, cu_seqlens, y, lse, window, scale);
}

void attention_forward_v11(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, Tensor& y,
                           Tensor& lse, int64_t window, float scale) {
  launch_forward<kV11>(q, k, v, cu_seqlens, y, lse, window, scale);
}

}  // namespace ladder
}  // namespace gpt::cuda
