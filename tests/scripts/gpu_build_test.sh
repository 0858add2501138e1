#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2031  # the commands given to `lib` expand in its subshell, on purpose
# scripts/lib/gpu-build.sh with stand-ins (tests/scripts/gpu_fakes.sh): gpu_setup makes $OUT (the caller's default
# unless OUT is set), keeps NVLink multicast off and unpacks .gpu-extras/debs through scripts/device-env only
# where that folder exists; gpu_machine_info names the GPU and the SPEEDRUN_REVISION commit; gpu_build configures
# preset `cuda` for the whole project and builds the targets named (all without a name), and a failed configure or
# build returns 1 with the error lines and BUILD FAILED.
#   gpu_build_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
# shellcheck source=tests/scripts/gpu_fakes.sh
source "$source_dir/tests/scripts/gpu_fakes.sh"
fakes_setup "$source_dir"

# lib 'COMMANDS': runs COMMANDS in the scratch checkout after sourcing the library; output in out.txt, status set.
lib() {
  status=0
  (cd "$tree" && source scripts/lib/gpu-build.sh && eval "$1") > "$work/out.txt" 2>&1 || status=$?
}

# gpu_setup: OUT from the environment, else the default given; no packages to unpack.
lib 'gpu_setup /tmp/unused; echo "OUT=$OUT NVLS=$NCCL_NVLS_ENABLE"'
expect_status 0
expect_output "^OUT=$OUT NVLS=0$"
[[ -d $OUT ]] || fail "gpu_setup did not make \$OUT"
expect_no_call dpkg "-x"
lib "unset OUT; gpu_setup $work/default-out; echo \"OUT=\$OUT\""
expect_output "^OUT=$work/default-out$"
[[ -d $work/default-out ]] || fail "gpu_setup did not make its default \$OUT"

# With .gpu-extras/debs the packages are unpacked into the private prefix and CMake looks there.
mkdir -p "$tree/.gpu-extras/debs" && touch "$tree/.gpu-extras/debs/libgtest-dev.deb"
lib 'gpu_setup /tmp/unused; echo "CMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH"'
expect_status 0
expect_call dpkg "-x $tree/.gpu-extras/debs/libgtest-dev.deb $SPEEDRUN_DEPS_PREFIX"
expect_output "^CMAKE_PREFIX_PATH=$SPEEDRUN_DEPS_PREFIX/usr"
rm -rf "$tree/.gpu-extras"

# gpu_machine_info: the GPU, the toolkit and the commit.
lib 'gpu_machine_info'
expect_output "NVIDIA H100 80GB HBM3"
expect_output "release 13.0"
expect_output "^commit 0123456789abcdef$"

# gpu_build with targets, then without (the whole project).
lib "gpu_build $work/build.log train_gpt harness"
expect_status 0
expect_call cmake "--preset cuda -DSPEEDRUN_GPU_ONLY=OFF"
expect_call cmake "--build build-cuda -j $(nproc) --target train_gpt harness"
expect_output "^built in [0-9]+ s$"
[[ -x $tree/build-cuda/bin/train_gpt && -x $tree/build-cuda/bin/harness ]] || fail "the targets were not built"
reset_calls
lib "gpu_build $work/build.log"
expect_status 0
expect_call cmake "--build build-cuda -j $(nproc)"
expect_no_call cmake "--target"

# Failures: configure, build, and a target the project does not have.
FAKE_FAIL=configure lib "gpu_build $work/build.log train_gpt"
expect_status 1
expect_output "CMake Error"
expect_output "BUILD FAILED \(full log: $work/build.log\)"
expect_output "scripts/device-deps"
FAKE_FAIL=build lib "gpu_build $work/build.log train_gpt"
expect_status 1
expect_output "error: identifier undefined"
lib "gpu_build $work/build.log no_such_program"
expect_status 1
expect_output "No rule to make target 'no_such_program'"

exit $((failures > 0))
