#include "trainer/build_info.h"

#ifndef SPEEDRUN_GIT_COMMIT
#define SPEEDRUN_GIT_COMMIT "unknown"
#endif
#ifndef SPEEDRUN_GIT_DIRTY
#define SPEEDRUN_GIT_DIRTY 0
#endif
#ifndef SPEEDRUN_BUILD_TYPE
#define SPEEDRUN_BUILD_TYPE "unknown"
#endif

namespace gpt {

const BuildInfo& build_info() {
  static const BuildInfo info{
      .git_commit = SPEEDRUN_GIT_COMMIT,
      .git_dirty = SPEEDRUN_GIT_DIRTY != 0,
      .compiler = __VERSION__,
      .build_type = SPEEDRUN_BUILD_TYPE,
#ifdef SPEEDRUN_HAVE_CUDA
      .cuda = true,
#endif
  };
  return info;
}

}  // namespace gpt
