#pragma once
// Which numbered version of a CUDA kernel runs: the promoted one unless an environment variable names another
// ("v2"), so that a whole training step can be timed with a candidate before it is promoted (attention_variants.cpp,
// the mix in elementwise.cu). Host code only (the CPU tests check it: tests/kernels/kernel_version_env_test.cpp).
#include <cstdlib>
#include <string>

#include "kernels/check.h"

namespace gpt::cuda {

// The version (1 … versions) that `value` of the variable `env` names; `promoted` when value is null or empty.
// Anything else is an error naming the variable, the value and the known versions.
inline int kernel_version_named(const char* env, const char* value, int promoted, int versions) {
  if (value == nullptr || *value == '\0') return promoted;
  for (int v = 1; v <= versions; ++v) {
    if (std::string(value) == "v" + std::to_string(v)) return v;
  }
  GPT_FAIL(env, "='", value, "' names no kernel version; known: v1 to v", versions);
}

inline int kernel_version_from_env(const char* env, int promoted, int versions) {
  return kernel_version_named(env, std::getenv(env), promoted, versions);
}

}  // namespace gpt::cuda
