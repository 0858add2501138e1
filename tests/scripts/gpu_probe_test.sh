#!/usr/bin/env bash
# scripts/gpu-probe with stand-ins (tests/scripts/gpu_fakes.sh): the whole CUDA build, then `ctest -L gpu` without
# the benchmarks, machine.txt, build.log and ctest-gpu.log in $OUT; the exit status is the tests', and a failed
# build stops it before the tests.
#   gpu_probe_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
# shellcheck source=tests/scripts/gpu_fakes.sh
source "$source_dir/tests/scripts/gpu_fakes.sh"
fakes_setup "$source_dir"

run_script gpu-probe
expect_status 0
expect_call cmake "--preset cuda -DSPEEDRUN_GPU_ONLY=OFF"
expect_no_call cmake "--target"
expect_call ctest "--test-dir build-cuda -L gpu -LE bench --output-on-failure"
for f in machine.txt build.log ctest-gpu.log; do [[ -s $OUT/$f ]] || fail "no $f in \$OUT"; done
grep -q "NVIDIA H100" "$OUT/machine.txt" || fail "machine.txt does not name the GPU"
expect_output "100% tests passed"

reset_calls
FAKE_FAIL=ctest run_script gpu-probe
expect_failed
expect_output "tests failed"

reset_calls
FAKE_FAIL=build run_script gpu-probe
expect_failed
expect_output "BUILD FAILED"
expect_no_call ctest "gpu"

exit $((failures > 0))
