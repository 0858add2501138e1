#!/usr/bin/env bash
# scripts/gpu-head-run with stand-ins (tests/scripts/gpu_fakes.sh): `start` builds the four targets, runs the GPU
# tests, launches `harness record` detached (setsid) with the proxy-corpus settings and returns while the run goes
# on; `wait` follows it to its end, copies the summary as DATE-GPU-COMMIT-head-proxy.json and prints its per-stage
# step times; `bench` runs train_step_bench on the proxy corpus (three stages, FP8 on, JSON into $OUT) and prints
# its rows; at most 8 files reach $OUT. A failing build, GPU test, run or bench fails the script with a message.
#   gpu_head_run_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
# shellcheck source=tests/scripts/gpu_fakes.sh
source "$source_dir/tests/scripts/gpu_fakes.sh"
fakes_setup "$source_dir"
export HEAD_RUN_DIR=$work/head-run FOLLOW_INTERVAL=0.2
# archive_has FILE: files.tgz in $OUT holds files/FILE.
archive_has() { tar tzf "$OUT/files.tgz" > "$work/archive.txt" && grep -qx "files/$1" "$work/archive.txt"; }

# start: the run (3 s) outlives the 1 s the call follows it.
FAKE_RUN_SECONDS=3 run_script gpu-head-run start 1
expect_status 0
expect_call cmake "--preset cuda -DSPEEDRUN_GPU_ONLY=OFF"
expect_call cmake "--target train_gpt harness gpu_tests train_step_bench"
expect_call ctest "--test-dir build-cuda -L gpu -LE bench -R Attention"
expect_call ctest "--test-dir build-cuda -L gpu -LE bench -E Attention"
expect_call harness "--db $HEAD_RUN_DIR/speedrun.db record --runs 1 --recipe head --backend cuda --data data/proxy"
expect_call harness \
  "--set data.cycle_train_shards=true --set validation.tokens=262144 --set schedule.cu_rows_multiplier=4"
grep -q "detached" "$calls/harness-detached" 2>/dev/null || fail "harness record did not run detached (setsid)"
expect_output "started harness record"
expect_output "the run is still going: run scripts/gpu-head-run wait again"
[[ -f $OUT/files.tgz ]] || fail "start left no files.tgz"
archive_has build.log || fail "files.tgz lacks build.log"

# A second start while the run goes on is refused.
run_script gpu-head-run start 1
expect_failed
expect_output "a run is already going"

# wait: to the end of the run, the summary under its dated name, the run's per-stage step times, then the GPU tests
# (cut to the seconds left) and the bench.
reset_calls
run_script gpu-head-run wait 200 tests bench
expect_status 0
expect_call ctest "-L gpu -LE bench -E Attention -j 8 --output-on-failure --timeout 240 --stop-time"
summary=$OUT/$(date -u +%Y-%m-%d)-h100-0123456-head-proxy.json
[[ -f $summary ]] || fail "no summary $summary; \$OUT: $(ls "$OUT")"
expect_output "summary: $summary"
expect_output "head-proxy-seed0: finished, 1285/1285 steps, final val loss 7.8490, train time 648.6 s"
expect_output "stage 0: steps 0-422, 274.0 ms/step"
expect_output "stage 2: steps 847-1284, 759.6 ms/step"
expect_call train_step_bench "--recipe head --data data/proxy --cu-rows-multiplier 4 --only stage0,stage1,stage2 --fp8 on \
--json $OUT/train-step-bench.json"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["benchmarks"]' "$OUT/train-step-bench.json" ||
  fail "train-step-bench.json is not Google Benchmark JSON"
expect_output "stage0 fp8=on: 500.0 ms/step \(forward 150.0, backward 330.0, optimizer 20.0\)"
expect_output "stage2 fp8=on: 500.0 ms/step"
expect_call harness "--db $HEAD_RUN_DIR/speedrun.db nightly --ingest $OUT/train-step-bench.json"
archive_has head-proxy-seed0.txt || fail "files.tgz lacks the trainer's log"
archive_has harness.log || fail "files.tgz lacks harness.log"
(($(find "$OUT" -type f | wc -l) <= 8)) || fail "more than 8 files in \$OUT: $(find "$OUT" -type f)"
expect_known_flags

# check: no run, the build and the bench; a failing bench fails the script.
reset_calls
FAKE_FAIL=bench run_script gpu-head-run check 200 bench
expect_failed
expect_output "train_step_bench FAILED"
expect_no_call harness "record"

# A failing GPU test starts no run; a failing build neither, and skips the tests.
reset_calls
FAKE_FAIL=ctest-attention run_script gpu-head-run start 5
expect_failed
expect_output "GPU tests FAILED"
expect_output "no run started"
expect_no_call harness "record"
reset_calls
FAKE_FAIL=build run_script gpu-head-run start 5
expect_failed
expect_output "BUILD FAILED"
expect_no_call ctest "gpu"
expect_no_call harness "record"

# A run that fails leaves no summary: `wait` says so and fails.
reset_calls
FAKE_FAIL=harness-run TESTS=0 run_script gpu-head-run start 10
expect_failed
expect_output "the run left no summary"

# stop: ends a run that is still going; it left no summary, so the call fails saying so.
reset_calls
FAKE_RUN_SECONDS=30 TESTS=0 run_script gpu-head-run start 1
expect_output "the run is still going"
pid=$(cat "$HEAD_RUN_DIR/harness.pid")
run_script gpu-head-run stop
expect_failed
expect_output "the run has ended"
expect_output "the run left no summary"
# (An ended process nobody has reaped yet still answers kill -0: its state, the third field of stat, is Z.)
read -r -a stat < "/proc/$pid/stat" 2> /dev/null
[[ ${stat[2]:-Z} == Z ]] || fail "stop left the harness (pid $pid) running"

# RECIPE: another recipe's run under its own name and folder, and its step rows.
reset_calls
export HEAD_RUN_DIR=$work/mini-ext-run
RECIPE=mini-ext TESTS=0 run_script gpu-head-run start 10
expect_status 0
expect_call harness "--db $HEAD_RUN_DIR/speedrun.db record --runs 1 --recipe mini-ext --backend cuda --data data/proxy"
expect_call harness "--name mini-ext-proxy"
expect_output "summary: $OUT/$(date -u +%Y-%m-%d)-h100-0123456-mini-ext-proxy.json"
reset_calls
RECIPE=mini-ext run_script gpu-head-run check 200 bench
expect_status 0
expect_call train_step_bench "--recipe mini-ext --data data/proxy --cu-rows-multiplier 4 --only stage0,stage1,stage2"
export HEAD_RUN_DIR=$work/head-run

# `wait` on a machine without a run, and an unknown action.
rm -rf "$HEAD_RUN_DIR"
run_script gpu-head-run wait 10
expect_failed
expect_output "no run under"
run_script gpu-head-run begin
expect_status 2

exit $((failures > 0))
