#pragma once
// Which version of a CUDA kernel runs: the promoted one unless an environment variable names another (a number "v2" for
// the mix in elementwise.cu, a name "persistent" for attention/kernels.cpp), so that a whole training step can be timed
// with a candidate before it is promoted. Host code only (the CPU tests check it:
// tests/kernels/kernel_version_env_test.cpp).
#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "base/check.h"

namespace gpt::cuda {

// The version (1 … versions) that `value` of the variable `env` names; `promoted` when value is null or empty.
// Anything else is an error naming the variable, the value and the known versions.
// The number N of a version name "vN" (N >= 1, no leading zero), or 0 for anything else. Parsed in place
// rather than compared with "v" + std::to_string(N): GCC 12 reports a false -Wrestrict on that concatenation
// in optimised builds, which -Werror turns into a failed Release build.
inline int kernel_version_number(std::string_view name) {
  if (name.size() < 2 || name[0] != 'v' || name[1] < '1' || name[1] > '9') return 0;
  int v = 0;
  const auto [end, ec] = std::from_chars(name.data() + 1, name.data() + name.size(), v);
  return ec == std::errc() && end == name.data() + name.size() ? v : 0;
}

inline int kernel_version_named(const char* env, const char* value, int promoted, int versions) {
  if (value == nullptr || *value == '\0') return promoted;
  const int v = kernel_version_number(value);
  if (v >= 1 && v <= versions) return v;
  GPT_FAIL(env, "='", value, "' names no kernel version; known: v1 to v", versions);
}

// The index into `names` of the kernel that `value` of the variable `env` names; 0 (the promoted one, listed first)
// when value is null or empty. Anything else is an error naming the variable, the value and the known names.
inline size_t kernel_index_named(const char* env, const char* value, std::span<const char* const> names) {
  if (value == nullptr || *value == '\0') return 0;
  std::string known;
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::string_view(value) == names[i]) return i;
    known += (i == 0 ? "" : ", ") + std::string(names[i]);
  }
  GPT_FAIL(env, "='", value, "' names no kernel; known: ", known);
}

inline int kernel_version_from_env(const char* env, int promoted, int versions) {
  return kernel_version_named(env, std::getenv(env), promoted, versions);
}

}  // namespace gpt::cuda
