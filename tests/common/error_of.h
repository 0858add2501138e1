#pragma once
// The gpt::Error message a callable throws, for tests that check what an error names.
#include <string>

#include "base/check.h"

namespace gpt::test {

// Runs f and returns the gpt::Error message it throws ("" when it does not throw).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace gpt::test
