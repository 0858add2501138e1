#!/usr/bin/env bash
# scripts/gpu-step-ab with stand-ins (tests/scripts/gpu_fakes.sh): the default arm and each setting's arm run
# train_step_bench in turn, ROUNDS times, the setting in the environment of its own rows only; the table gives each
# arm's mean ms/step, its ratio to the default arm and the stages whose losses equal the default arm's bit for bit;
# one benchmark JSON for the default arm and one per setting under variants/; settings that are not NAME=VALUE,
# a missing corpus and a failing row are errors.
#   gpu_step_ab_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
# shellcheck source=tests/scripts/gpu_fakes.sh
source "$source_dir/tests/scripts/gpu_fakes.sh"
fakes_setup "$source_dir"
unset ROUNDS DATA STEP_ARGS FAKE_STEP_MS FAKE_STEP_LOSS

# Two settings: one faster with the same losses, one that changes the losses.
run_script gpu-step-ab FAKE_STEP_MS=450.0 FAKE_STEP_LOSS=10.25
expect_status 0
expect_known_flags
expect_call cmake "--target train_step_bench"
expect_call train_step_bench "--data data/proxy --cu-rows-multiplier 4 --only stage0,stage1,stage2 --fp8 on --steps 4"
[[ $(wc -l < "$calls/train_step_bench") == 6 ]] || fail "expected 3 arms × 2 rounds, got: $(cat "$calls/train_step_bench")"
table=$OUT/step-ab.txt
grep -qE '^default +500.0 ms \(1.000×\) +500.0 ms \(1.000×\) +500.0 ms \(1.000×\) +stage0/fp8:on, stage1/fp8:on, stage2/fp8:on$' \
  "$table" || fail "no default row: $(cat "$table")"
grep -qE '^FAKE_STEP_MS=450.0 +450.0 ms \(0.900×\) .* stage0/fp8:on, stage1/fp8:on, stage2/fp8:on$' "$table" ||
  fail "no 0.900× row with equal losses: $(cat "$table")"
grep -qE '^FAKE_STEP_LOSS=10.25 +500.0 ms \(1.000×\) .* none$' "$table" ||
  fail "the arm that changes the losses is not marked: $(cat "$table")"
ls "$OUT"/benchmarks/*.json > /dev/null 2>&1 || fail "no benchmark JSON for the default arm"
ls "$OUT"/benchmarks/variants/FAKE_STEP_MS-450-0/*.json > /dev/null 2>&1 || fail "no variants JSON for FAKE_STEP_MS=450.0"
expect_output "benchmarks for results/benchmarks"

reset_calls
ROUNDS=1 BUILD=0 STEP_ARGS="--only stage2 --fp8 on" run_script gpu-step-ab FAKE_STEP_MS=400
expect_status 0
expect_no_call cmake "--build"
[[ $(wc -l < "$calls/train_step_bench") == 2 ]] || fail "expected 2 rows, got: $(cat "$calls/train_step_bench")"
expect_output "FAKE_STEP_MS=400 +400.0 ms \(0.800×\)"

for bad in "" "lowercase=1" "NOVALUE" "A=b c"; do
  reset_calls
  if [[ -z $bad ]]; then run_script gpu-step-ab; else run_script gpu-step-ab "$bad"; fi
  expect_status 2
  expect_no_call train_step_bench "--data"
done

reset_calls
DATA=$work/none BUILD=0 run_script gpu-step-ab FAKE_STEP_MS=400
expect_status 2
expect_output "no corpus at DATA="

reset_calls
FAKE_FAIL=bench BUILD=0 run_script gpu-step-ab FAKE_STEP_MS=400
expect_failed
expect_output "the default row of round 1 failed"

exit $((failures > 0))
