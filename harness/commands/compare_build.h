#pragma once
// Building one arm of a comparison: the revision is checked out once into <repo>/<cache>/<sha> (a detached git
// worktree) and built there with the project's CMake preset (`cmake --preset cpu` by default) plus any extra
// configure arguments, into build-compare-<preset>/. Builds are incremental: a second comparison of the same
// revision only relinks what changed.
#include <filesystem>
#include <string>
#include <vector>

#include "harness/launcher/command.h"

namespace gpt::harness {

struct BuildSettings {
  std::string preset = "cpu";           // a configure preset of the revision's CMakePresets.json
  std::vector<std::string> cmake_args;  // appended to the configure command
  std::string cache_dir = ".cache/compare";
  int jobs = 2;
  double timeout_s =
      kDefaultBuildTimeoutS;  // each step (worktree, configure, build); its process group is killed past it
};

struct BuiltRevision {
  std::string sha;
  std::filesystem::path tree, build_dir, binary;  // binary: <build_dir>/bin/train_gpt
};

// The configure command for `tree` (exposed for tests): `cmake --preset P -B DIR ARGS...` when the tree has a
// CMakePresets.json, else `cmake -S tree -B DIR -DCMAKE_BUILD_TYPE=RelWithDebInfo ARGS...`.
std::vector<std::string> configure_command(const std::filesystem::path& tree, const std::filesystem::path& build_dir,
                                           const BuildSettings& settings);

// The commit `revision` names in the repository around the current directory; "" when there is no repository
// there or the name is no commit of it.
std::string resolve_revision(const std::string& revision);

// Resolves `revision` in the repository around the current directory, checks it out (once) and builds its
// train_gpt, saying so at info level. Throws gpt::Error naming the step and its log on failure, and
// CommandTimedOut naming the step and --build-timeout when one runs past settings.timeout_s.
BuiltRevision build_revision(const std::string& revision, const BuildSettings& settings);

}  // namespace gpt::harness
