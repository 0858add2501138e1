// Which production attention kernel runs (kernels/cuda/attention/kernels.h): the promoted one unless the
// environment names the candidate.
#include <cstdlib>

#include "kernels/cuda/attention/kernels.h"
#include "kernels/cuda/kernel_version_env.h"

namespace gpt::cuda {

namespace {

template <typename Kernel, size_t N>
const Kernel& chosen(const Kernel (&kernels)[N], const char* env) {
  const char* names[N];
  for (size_t i = 0; i < N; ++i) names[i] = kernels[i].name;
  return kernels[kernel_index_named(env, std::getenv(env), names)];
}

}  // namespace

const AttentionForwardKernel& attention_forward_in_use() {
  static const AttentionForwardKernel& k = chosen(kAttentionForwardKernels, "SPEEDRUN_ATTENTION_FORWARD");
  return k;
}

const AttentionBackwardKernel& attention_backward_in_use() {
  static const AttentionBackwardKernel& k = chosen(kAttentionBackwardKernels, "SPEEDRUN_ATTENTION_BACKWARD");
  return k;
}

}  // namespace gpt::cuda
