#!/usr/bin/env bash
# scripts/gpu-train-check with stand-ins (tests/scripts/gpu_fakes.sh): the five targets, the ModelCuda tests alone,
# the other GPU tests, attention_bench and train_step_bench with JSON output, then a `mini` run on the copied corpus
# whose schedule and validation are sized from the shards' headers (10M training tokens: 69 scheduled steps, 15
# extension steps; 300K validation tokens: one 262,144-token window), and a summary with the step rows. Without a
# corpus the run is skipped; a failing run, failing tests or a failed build fail the script.
#   gpu_train_check_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
# shellcheck source=tests/scripts/gpu_fakes.sh
source "$source_dir/tests/scripts/gpu_fakes.sh"
fakes_setup "$source_dir"

# Shards with only their 256 x int32 header (magic, version, token count): the script reads no more.
corpus=$tree/.gpu-extras/data
mkdir -p "$corpus"
python3 - "$corpus" << 'PY'
import struct, sys
for name, tokens in (("train_000001.bin", 6_000_000), ("train_000002.bin", 4_000_000), ("val_000000.bin", 300_000)):
    open(f"{sys.argv[1]}/{name}", "wb").write(struct.pack("<256i", 20240520, 1, tokens, *[0] * 253))
PY

run_script gpu-train-check
expect_status 0
expect_call cmake "--target gpu_tests ladder_tests train_step_bench train_gpt attention_bench"
expect_call gpu_tests "--gtest_filter=ModelCuda.*"
expect_call ctest "--test-dir build-cuda -L gpu -LE bench -E ModelCuda -j 4"
expect_call attention_bench "--benchmark_out=$OUT/attention-bench.json --benchmark_out_format=json"
expect_call train_step_bench "--json $OUT/train-step-bench.json"
expect_call train_gpt "--recipe mini --backend cuda --data .gpu-extras/data --seed 0 --run-id mini-cuda \
--out build-cuda/mini-run --set schedule.num_scheduled=69 --set schedule.num_extension=15 \
--set validation.tokens=262144 --set validation.batch_tokens=262144"
[[ -s $OUT/mini-cuda.txt && -s $OUT/mini-cuda.json ]] || fail "the mini run's log and summary are not in \$OUT"
expect_output "^mini +finished in [0-9]+ s: step:10/10 val_loss:5.0000"
expect_output "^stage2 +on +500.0 +150.0 +330.0 +20.0"
expect_output "^stage0 +off +500.0"
expect_known_flags

# MINI_EXTRA reaches the run; a failing run fails the script.
reset_calls
FAKE_FAIL=train_gpt MINI_EXTRA="--set fp8=false" run_script gpu-train-check
expect_failed
expect_call train_gpt "--set fp8=false"
expect_output "^mini +FAILED exit 1"

# No corpus: the run is skipped, the rest passes.
reset_calls
rm -rf "$tree/.gpu-extras"
run_script gpu-train-check
expect_status 0
expect_output "^mini +skipped \(no corpus"
[[ ! -e $calls/train_gpt ]] || fail "train_gpt ran without a corpus"

reset_calls
FAKE_FAIL=ctest run_script gpu-train-check
expect_failed
expect_output "^ctest +FAILED"

reset_calls
FAKE_FAIL=build run_script gpu-train-check
expect_failed
expect_output "BUILD FAILED"
[[ ! -e $calls/ctest ]] || fail "the tests ran after a failed build"

exit $((failures > 0))
