// Which attention version runs (kernels/cuda/attention_variants.h): the promoted one unless the environment names
// another.
#include <span>

#include "kernels/cuda/attention_variants.h"
#include "kernels/cuda/kernel_version_env.h"
#include "base/check.h"

namespace gpt::cuda {

namespace {

// Versions are named v1, v2, … in table order, so the environment's name is parsed as a version number
// (kernel_version_env.h: an unknown name is an error naming the variable).
template <typename Variant>
const Variant& chosen(std::span<const Variant> variants, int promoted, const char* env) {
  const int version = kernel_version_from_env(env, promoted + 1, static_cast<int>(variants.size()));
  const Variant& v = variants[static_cast<size_t>(version - 1)];
  GPT_CHECK(kernel_version_number(v.name) == version, env, ": the version table lists ", v.name, " as v", version);
  return v;
}

}  // namespace

const AttentionForwardVariant& attention_forward_in_use() {
  static const AttentionForwardVariant& v =
      chosen<AttentionForwardVariant>(kAttentionForwardVariants, kPromotedForward, "SPEEDRUN_ATTENTION_FORWARD");
  return v;
}

const AttentionBackwardVariant& attention_backward_in_use() {
  static const AttentionBackwardVariant& v =
      chosen<AttentionBackwardVariant>(kAttentionBackwardVariants, kPromotedBackward, "SPEEDRUN_ATTENTION_BACKWARD");
  return v;
}

}  // namespace gpt::cuda
