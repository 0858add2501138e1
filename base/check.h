#pragma once
// Error reporting shared by every layer (the base library: kernels, trainer and harness all depend on it, it on
// nothing of the project): exceptions with context, never exit() inside a library.
#include <sstream>
#include <stdexcept>
#include <string>

namespace gpt {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <typename... Args>
[[noreturn]] void fail(const char* file, int line, const char* cond, const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  if (cond != nullptr && os.str().empty()) os << "check failed: " << cond;
  os << " [" << file << ":" << line << "]";
  throw Error(os.str());
}
}  // namespace detail

}  // namespace gpt

// GPT_CHECK(cond, "message parts", value, ...): throws gpt::Error naming the failed condition's context.
#define GPT_CHECK(cond, ...)                                                                \
  do {                                                                                      \
    if (!(cond)) ::gpt::detail::fail(__FILE__, __LINE__, #cond __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)
#define GPT_FAIL(...) ::gpt::detail::fail(__FILE__, __LINE__, nullptr, __VA_ARGS__)
