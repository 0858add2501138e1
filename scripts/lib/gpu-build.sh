# shellcheck shell=bash
# The preamble the scripts/gpu-* scripts share on the GPU machine: where their files go, the libraries the build
# needs, the machine's description and the CUDA build. Sourced from the checkout's root:
#   source scripts/lib/gpu-build.sh
#   gpu_setup /tmp/NAME-out                # $OUT (default the argument) exists; packages, NCCL and NVLink settled
#   gpu_machine_info > "$OUT/machine.txt"  # date, GPU, driver, clocks, toolchain, commit
#   gpu_build "$OUT/build.log" TARGET...   # build-cuda, whole project (SPEEDRUN_GPU_ONLY=OFF); no target: all
#
# Libraries: a GPU machine whose image has nvcc and CMake but not the Debian libraries of the build gets them from
# .gpu-extras/debs, packed on a machine with a package registry by scripts/device-deps and copied along with the
# checkout; scripts/device-env unpacks them into a private prefix. Without that folder the system's are used.

# The run settings of the proxy corpus (scripts/build-corpus proxy) that scripts/gpu-head-run's runs use and any
# script training on it the same way: its shards cycle, validation reads 262,144 tokens it holds, 4× the rows of
# cu_seqlens for its short documents.
# shellcheck disable=SC2034  # read by the scripts that source this file
gpu_proxy_settings=(--set data.cycle_train_shards=true --set validation.tokens=262144 --set schedule.cu_rows_multiplier=4)

# gpu_setup DEFAULT_OUT
gpu_setup() {
  OUT=${OUT:-$1}
  export OUT
  mkdir -p "$OUT"
  # NVLink multicast stays off: shared hosts do not offer it.
  export NCCL_NVLS_ENABLE=0
  if [[ -d .gpu-extras/debs ]]; then
    # shellcheck source=scripts/device-env
    source scripts/device-env
  fi
  # NCCL (tests/gpu/nccl_comm_test.cpp, the multi-GPU trainer): the toolkit's or a Debian copy, else the one
  # PyTorch ships (nvidia/nccl, header and libnccl.so.2); kernels/CMakeLists.txt looks under $NCCL_ROOT.
  if [[ -z ${NCCL_ROOT:-} ]] && ! ls /usr/local/cuda/include/nccl.h /usr/include/nccl.h >/dev/null 2>&1; then
    NCCL_ROOT=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null) && export NCCL_ROOT
  fi
  if [[ -n ${NCCL_ROOT:-} ]]; then export LD_LIBRARY_PATH="$NCCL_ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
}

# gpu_machine_info: what the measurements ran on (one line or block per tool; a missing tool leaves its error).
gpu_machine_info() {
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
  nvcc --version | tail -2
  cmake --version | head -1
  g++ --version | head -1
  echo "commit ${SPEEDRUN_REVISION:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "NCCL_ROOT=${NCCL_ROOT:-}"
} 2>&1

# gpu_build LOG [TARGET...]: configures preset `cuda` (build-cuda) for the whole project and builds the targets, all
# of them when none is named; the output goes to LOG. On failure prints the errors and returns 1.
gpu_build() {
  local log=$1 start=$SECONDS
  shift
  if ! { cmake --preset cuda -DSPEEDRUN_GPU_ONLY=OFF &&
         cmake --build build-cuda -j "$(nproc)" ${1:+--target "$@"}; } > "$log" 2>&1; then
    grep -E -B2 -A8 'error|Could not find|CMake Error|No rule to make target' "$log" | head -60
    echo "BUILD FAILED (full log: $log). Missing libraries? Run scripts/device-deps where a package registry is"
    echo "reachable and copy .gpu-extras/ along with the checkout."
    return 1
  fi
  echo "built in $((SECONDS - start)) s"
}
