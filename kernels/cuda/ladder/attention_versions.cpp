// Look-ups of the kernel ladder by version name (kernels/cuda/ladder/attention_versions.h).
#include "kernels/cuda/ladder/attention_versions.h"

#include <string_view>

#include "base/check.h"

namespace gpt::cuda::ladder {

namespace {

template <typename Version, size_t N>
const Version& named(const Version (&versions)[N], const char* name, const char* direction) {
  for (const Version& v : versions) {
    if (std::string_view(v.name) == name) return v;
  }
  GPT_FAIL("the attention kernel ladder has no ", direction, " version '", name, "' (v1 to v", N, ")");
}

}  // namespace

const AttentionForwardVersion& forward_version(const char* name) {
  return named(kAttentionForwardVersions, name, "forward");
}

const AttentionBackwardVersion& backward_version(const char* name) {
  return named(kAttentionBackwardVersions, name, "backward");
}

}  // namespace gpt::cuda::ladder
