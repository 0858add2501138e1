#pragma once
// The fingerprint of the machine a sweep runs on: GPU and driver (nvidia-smi), CUDA and NCCL versions,
// CPU model, the harness's compiler and build, and the git revision of the working directory. Fields
// that cannot be determined stay empty; probing never fails.
#include "harness/store/store.h"

namespace gpt::harness {

Environment probe_environment();

}  // namespace gpt::harness
