#!/usr/bin/env bash
# scripts/gpu-session with stand-ins (tests/scripts/gpu_fakes.sh): the five targets, `ctest -L gpu`, the step rows,
# the attention and ops benchmarks with the commit, GPU and driver in their context, then the stage-2 row with the
# faster production attention kernels and mix-backward version of this run's benchmarks (named in the SPEEDRUN_*
# variables), and one merged Google Benchmark JSON under $OUT/benchmarks whose context names scripts/gpu-session and
# the commit. Failing attention tests leave out the variant row and fail the script; the JSON is still merged.
#   gpu_session_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
# shellcheck source=tests/scripts/gpu_fakes.sh
source "$source_dir/tests/scripts/gpu_fakes.sh"
fakes_setup "$source_dir"

merged() { find "$OUT/benchmarks" -name '*.json' 2>/dev/null | head -1; }

run_script gpu-session
expect_status 0
expect_call cmake "--target gpu_tests ladder_tests attention_bench train_step_bench ops_a_cuda_bench"
expect_call ctest "--test-dir build-cuda -L gpu -LE bench -j 8 --output-on-failure --timeout 240"
expect_call train_step_bench "--json $OUT/train-step-bench.json"
expect_call attention_bench "--benchmark_filter=BM_Attention --benchmark_min_time=0.05"
expect_call attention_bench \
  "--benchmark_context=git_commit=0123456789abcdef,gpu=NVIDIA H100 80GB HBM3,driver=580.159.04"
expect_call attention_bench "--benchmark_out=$OUT/attention-bench.json --benchmark_out_format=json"
expect_call ops_a_cuda_bench "--benchmark_filter=Softcap|Mix|Fp8|Relu|Scatter"
# The stand-in benchmarks label v4 the promoted forward (fa3), v7 the candidate backward (deferred_dq), and time
# the residual mix backward v4 and forward v1 alone.
expect_call train_step_bench "SPEEDRUN_ATTENTION_BACKWARD=deferred_dq SPEEDRUN_ATTENTION_FORWARD=fa3 \
SPEEDRUN_MIX_BACKWARD=v4 SPEEDRUN_MIX_FORWARD=v1 SPEEDRUN_SCATTER_ROWS= --only stage2 --fp8 on --json \
$OUT/train-step-variants.json"
expect_output "stage-2 row with forward fa3, backward deferred_dq, mix forward v1, mix backward v4, scatter promoted"
file=$(merged)
[[ $(basename "${file:-none}") == 2026-12-07-0500-0123456.json ]] ||
  fail "merged benchmark JSON: '$file', expected \$OUT/benchmarks/2026-12-07-0500-0123456.json"
expect_output "benchmarks for results/benchmarks: $OUT/benchmarks/2026-12-07-0500-0123456.json"
if [[ -n $file ]]; then
  python3 - "$file" << 'PY' || fail "merged JSON: wrong context or entries"
import json, sys
doc = json.load(open(sys.argv[1]))
context, names = doc["context"], [b["name"] for b in doc["benchmarks"]]
assert context["executable"] == "scripts/gpu-session", context
assert context["git_commit"] == "0123456789abcdef", context
assert sorted(context["source"]) == ["attention-bench.json", "ops-a-bench.json", "train-step-bench.json",
                                     "train-step-variants.json"], context["source"]
assert "BM_TrainStep/stage2/fp8:on/data:loader/attention:candidate" in names, names
PY
fi
expect_known_flags

# Narrower: no step rows (and no step bench built), no variant row.
reset_calls
rm -rf "$OUT"
STEP=0 run_script gpu-session
expect_status 0
expect_call cmake "--target gpu_tests ladder_tests attention_bench ops_a_cuda_bench"
[[ ! -e $calls/train_step_bench ]] || fail "STEP=0 ran train_step_bench"

# Failing attention tests: no variant row, exit 1, the measurements still merged.
reset_calls
rm -rf "$OUT"
FAKE_FAIL=ctest run_script gpu-session
expect_failed
expect_output "attention tests did not all pass: no variant row"
expect_no_call train_step_bench "train-step-variants"
[[ -n $(merged) ]] || fail "no merged JSON after failing tests"

reset_calls
FAKE_FAIL=build run_script gpu-session
expect_failed
expect_output "BUILD FAILED"
[[ ! -e $calls/ctest ]] || fail "the tests ran after a failed build"

exit $((failures > 0))
