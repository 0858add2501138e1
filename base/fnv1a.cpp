#include "base/fnv1a.h"

#include <cstdio>

namespace gpt {

std::string hex64(std::uint64_t value) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(value));
  return hex;
}

}  // namespace gpt
