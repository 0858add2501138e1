#!/usr/bin/env bash
# scripts/gpu-kernel-table with stand-ins (tests/scripts/gpu_fakes.sh). By default: builds train_step_bench, traces
# one stage-2 step (FP8 on) with --kernel-trace on the proxy corpus's batches when data/proxy has train shards,
# and tables the intervals by family and by kernel; STAGE and FP8 reach the bench; a failed bench or a missing
# trace fails the script. NCU=1: profiles one step under ncu's duration metric with the launch cap and prints the
# kernels summed by name, the launches before its first gpt:: kernel (the bench's reference GEMM) counted apart.
# Without ncu, with a profile that measured nothing, or after a failed build, the script fails.
#   gpu_kernel_table_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
# shellcheck source=tests/scripts/gpu_fakes.sh
source "$source_dir/tests/scripts/gpu_fakes.sh"
fakes_setup "$source_dir"

run_script gpu-kernel-table
expect_status 0
expect_call cmake "--target train_step_bench"
expect_call train_step_bench "--only stage2 --fp8 on --steps 2 --warmup 2 --kernel-trace"
expect_no_call train_step_bench "--data"  # data/proxy holds no train shard
expect_output "traced step: 500.0 ms"
expect_output "3 kernels, 1 copies and memsets; 0.1 ms of GPU activity in all"
expect_output "\| GEMM \| 0.0 \| 58.8% \| 1 \|"
expect_output "\| norms \| 0.0 \| 39.2% \| 2 \|"  # the CSV's quoted name with its comma stays one field
expect_output "\| copies \| 0.0 \| 2.0% \| 1 \|"
expect_output "\| 0.02 \| 2 \| .gpt::rmsnorm_kernel<float>. \|"
[[ -s $OUT/kernel-table.txt && -s $OUT/trace-stage2-fp8on.csv ]] || fail "kernel-table.txt or the trace CSV missing"
[[ ! -e $calls/ncu ]] || fail "ncu ran without NCU=1"
expect_known_flags

reset_calls
touch "$tree/data/proxy/train_000000.bin"
STAGE=stage0 FP8=off run_script gpu-kernel-table
expect_status 0
expect_call train_step_bench "--only stage0 --fp8 off"
expect_call train_step_bench "--data data/proxy --cu-rows-multiplier 4"
[[ -s $OUT/trace-stage0-fp8off.csv ]] || fail "no trace CSV for stage0 fp8 off"
rm "$tree/data/proxy/train_000000.bin"

reset_calls
FAKE_FAIL=bench run_script gpu-kernel-table
expect_failed
expect_output "the traced step failed"

reset_calls
NCU=1 run_script gpu-kernel-table
expect_status 0
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
NCU=1 FP8=off NCU_LAUNCHES=500 run_script gpu-kernel-table
expect_status 0
expect_call ncu "--launch-count 500"
expect_call train_step_bench "--fp8 off"

reset_calls
NCU=1 FAKE_FAIL=ncu run_script gpu-kernel-table
expect_failed
expect_output "ncu measured no kernel"
expect_output "profiling failed"

reset_calls
NCU=1 FAKE_FAIL=build run_script gpu-kernel-table
expect_failed
expect_output "BUILD FAILED"
[[ ! -e $calls/ncu ]] || fail "ncu ran after a failed build"

if ! compgen -G '/opt/nvidia/nsight-compute/*/ncu' > /dev/null; then
  rm "$fakebin/ncu"
  NCU=1 run_script gpu-kernel-table
  expect_failed
  expect_output "ncu not found"
fi

exit $((failures > 0))
