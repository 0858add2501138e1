#pragma once
// What this binary is: the git revision and build it came from, written into run logs and summaries.
#include <string>

namespace gpt {

struct BuildInfo {
  std::string git_commit;  // "unknown" outside a git checkout
  bool git_dirty = false;
  std::string compiler;
  std::string build_type;
  bool cuda = false;
};

const BuildInfo& build_info();

}  // namespace gpt
