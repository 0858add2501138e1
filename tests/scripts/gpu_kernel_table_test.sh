#!/usr/bin/env bash
# scripts/gpu-kernel-table with stand-ins (tests/scripts/gpu_fakes.sh): builds train_step_bench, profiles one stage-2
# step (FP8 on, autotuning off) under ncu's duration metric with the launch cap, and prints the kernels of the step
# summed by name, the launches before its first gpt:: kernel (the bench's reference GEMM) counted apart; FP8=off
# reaches the bench. Without ncu, with a profile that measured nothing, or after a failed build, the script fails.
#   gpu_kernel_table_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
# shellcheck source=tests/scripts/gpu_fakes.sh
source "$source_dir/tests/scripts/gpu_fakes.sh"
fakes_setup "$source_dir"

run_script gpu-kernel-table
expect_status 0
expect_call cmake "--target train_step_bench"
expect_call ncu "SPEEDRUN_GEMM_AUTOTUNE=0 --clock-control none --cache-control none --launch-count 3000 \
--metrics gpu__time_duration.sum --csv --print-units base build-cuda/trainer/train_step_bench --only stage2 --fp8 on \
--steps 1 --warmup 0"
expect_call train_step_bench "--only stage2 --fp8 on --steps 1 --warmup 0"
expect_output "skipped 1 launches before the step's first gpt:: kernel \(the bench's reference GEMM probe, 2.0 ms\)"
expect_output "3 kernels of the step, 0.0 ms in all"
expect_output "0.01 ms  66.7%  x1 +gpt::attention_forward_kernel<64>"
expect_output "0.00 ms  33.3%  x2 +gpt::rmsnorm_kernel<float>"
[[ -s $OUT/kernel-table.txt && -s $OUT/ncu.csv ]] || fail "kernel-table.txt or ncu.csv missing in \$OUT"
expect_known_flags

reset_calls
FP8=off NCU_LAUNCHES=500 run_script gpu-kernel-table
expect_status 0
expect_call ncu "--launch-count 500"
expect_call train_step_bench "--fp8 off"

reset_calls
FAKE_FAIL=ncu run_script gpu-kernel-table
expect_failed
expect_output "ncu measured no kernel"
expect_output "profiling failed"

reset_calls
FAKE_FAIL=build run_script gpu-kernel-table
expect_failed
expect_output "BUILD FAILED"
[[ ! -e $calls/ncu ]] || fail "ncu ran after a failed build"

if ! compgen -G '/opt/nvidia/nsight-compute/*/ncu' > /dev/null; then
  rm "$fakebin/ncu"
  run_script gpu-kernel-table
  expect_failed
  expect_output "ncu not found"
fi

exit $((failures > 0))
