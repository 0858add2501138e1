// Which attention version runs (kernels/cuda/attention_variants.h): the promoted one unless the environment names
// another.
#include <cstdlib>
#include <span>
#include <string>

#include "kernels/cuda/attention_variants.h"
#include "kernels/check.h"

namespace gpt::cuda {

namespace {

template <typename Variant>
const Variant& chosen(std::span<const Variant> variants, int promoted, const char* env) {
  const char* name = std::getenv(env);
  if (name == nullptr || *name == '\0') return variants[static_cast<size_t>(promoted)];
  std::string known;
  for (const Variant& v : variants) {
    if (std::string(v.name) == name) return v;
    known += known.empty() ? v.name : std::string(", ") + v.name;
  }
  GPT_FAIL(env, "='", name, "' names no attention kernel version; known: ", known);
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
