#!/usr/bin/env bash
# scripts/gpu-check with stand-ins (tests/scripts/gpu_fakes.sh): builds the GPU tests, the kernel ladder and the
# GEMM and attention benchmarks; `all` runs `ctest -L gpu` and both benchmarks with JSON output, then a summary
# table whose GEMM ratio is to docs/ANCHORS.md's figure; `tests` and `bench` run one half each; failing tests or a
# failing benchmark fail the script.
#   gpu_check_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
# shellcheck source=tests/scripts/gpu_fakes.sh
source "$source_dir/tests/scripts/gpu_fakes.sh"
fakes_setup "$source_dir"

run_script gpu-check
expect_status 0
expect_call cmake "--target gpu_tests ladder_tests gemm_bench attention_bench"
expect_call ctest "--test-dir build-cuda -L gpu -LE bench --output-on-failure --timeout 300"
for b in gemm_bench attention_bench; do
  expect_call "$b" "--benchmark_out=$OUT/$b.json --benchmark_out_format=json"
  [[ -s $OUT/$b.json ]] || fail "no $b.json in \$OUT"
done
# 700 TFLOP/s against the 826 of docs/ANCHORS.md's bf16 8192^3 row.
grep -qE '^BM_GemmBf16/m:8192/n:8192/k:8192 +1\.500 +700\.0 +0\.85' "$OUT/summary.txt" ||
  fail "summary.txt lacks the GEMM row with its anchor ratio: $(cat "$OUT/summary.txt")"
expect_output "attention targets"

reset_calls
run_script gpu-check tests
expect_status 0
expect_call ctest "-L gpu"
[[ ! -e $calls/gemm_bench ]] || fail "'tests' ran the benchmarks"

reset_calls
run_script gpu-check bench
expect_status 0
expect_call gemm_bench "--benchmark_out="
[[ ! -e $calls/ctest ]] || fail "'bench' ran the tests"

reset_calls
FAKE_FAIL=ctest run_script gpu-check tests
expect_failed
expect_output "tests failed"

reset_calls
FAKE_FAIL=kernel-bench run_script gpu-check bench
expect_failed
expect_output "gemm_bench FAILED"

reset_calls
FAKE_FAIL=build run_script gpu-check
expect_failed
expect_output "BUILD FAILED"
[[ ! -e $calls/ctest ]] || fail "the tests ran after a failed build"

exit $((failures > 0))
