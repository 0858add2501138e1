#!/usr/bin/env bash
# scripts/gpu-fidelity with stand-ins (tests/scripts/gpu_fakes.sh): builds train_gpt and reference_export, runs the
# queue in a detached worker and collects: seed 1's shortened run writes its batches and the step-100 checkpoint,
# the trained-weights check exports from that checkpoint and runs scripts/reference-check on it, the attention
# mutation is judged against that check's JSON (--expect-fail --baseline), the weights export takes no step, and
# the null run is seed 1 again with NULL_SETTING in its environment, writing its own batches, and side-by-side reads
# the five seeds' logs and the null's batches; every run and export gets the proxy-corpus settings. A failed step is
# marked, the steps that need its output wait, and the call fails naming it; a failed build stops the script.
#   gpu_fidelity_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
# shellcheck source=tests/scripts/gpu_fakes.sh
source "$source_dir/tests/scripts/gpu_fakes.sh"
fakes_setup "$source_dir"
export FIDELITY_WORK=$work/fidelity PYTHON=fake-python REF_DIR=$work/reference
fid=$FIDELITY_WORK
corpus="--data data/proxy --set data.cycle_train_shards=true --set schedule.cu_rows_multiplier=4 \
--set validation.tokens=65536 --set validation.batch_tokens=65536"
short="--set schedule.num_scheduled=146 --set schedule.num_extension=15 --set validation.every=25 --set fp8=false \
--set schedule.warmup=false"

STEPS="seed1 seed2 seed3 seed4 seed5 reference-check-trained mutation-attention null-seed1 weights side-by-side" \
  run_script gpu-fidelity 40
expect_status 0
expect_call cmake "--target train_gpt reference_export"
expect_call train_gpt "--recipe head --backend cuda --seed 1 --run-id short-seed1 --out $fid/runs $corpus $short \
--set debug.dump_batches=$fid/batches --checkpoint-every 100"
expect_call train_gpt "--seed 3 --run-id short-seed3 --out $fid/runs $corpus $short"
expect_call train_gpt "--seed 5 --run-id short-seed5 --out $fid/runs $corpus $short"
expect_call train_gpt "SPEEDRUN_SCATTER_ROWS=v1 --recipe head --backend cuda --seed 1 --run-id short-null-seed1 \
--out $fid/runs $corpus $short --set debug.dump_batches=$fid/null-batches"
expect_call reference_export "--recipe head --backend cuda --seed 1 --out $fid/export-reference-check-trained \
$corpus --microbatches 3 --checkpoint $fid/runs/short-seed1.step000100.ckpt $short"
expect_call python "scripts/reference-check $REF_DIR $fid/export-reference-check-trained --compile \
--out $fid/check-reference-check-trained"
expect_call reference_export "--microbatches 3 --checkpoint $fid/runs/short-seed1.step000100.ckpt \
--perturb-attention-layer 0 $short --mutation-factor 1.01"
expect_call python "--expect-fail --baseline $fid/reference-check-trained.json"
expect_call reference_export "--out $fid/weights --steps 0 --microbatches 1 $corpus"
expect_call python "scripts/side-by-side $REF_DIR --weights $fid/weights --batches $fid/batches --scheduled 146 \
--extension 15 --compared-seed 1 --compile --out $fid/side-by-side --ours 1=$fid/runs/short-seed1.txt \
2=$fid/runs/short-seed2.txt 3=$fid/runs/short-seed3.txt 4=$fid/runs/short-seed4.txt 5=$fid/runs/short-seed5.txt \
--null-batches $fid/null-batches --null-label SPEEDRUN_SCATTER_ROWS=v1"
expect_output "^\[side-by-side\] paired training losses: PASS"
expect_output "^\[reference-check-trained\] reference check: PASS"
expect_output "^side-by-side: done"
for f in reference-check-trained.json mutation-attention.json side-by-side.json queue.txt logs.tgz summaries.tgz; do
  [[ -s $OUT/$f ]] || fail "no $f in \$OUT"
done
[[ ! -d $fid/export-reference-check-trained ]] || fail "the export was not removed after its check"
expect_known_flags

# `status` reads the marks.
run_script gpu-fidelity status
expect_output "^weights: done"

# The MUDD-scale mutation exports the trained pair with μ × F and is judged against reference-check-trained.
reset_calls
rm -rf "$fid" "$OUT"
STEPS="seed1 reference-check-trained mutation-mudd-scale-x1.02" run_script gpu-fidelity 40
expect_status 0
expect_call reference_export "--out $fid/export-mutation-mudd-scale-x1.02 $corpus --microbatches 3 \
--checkpoint $fid/runs/short-seed1.step000100.ckpt --perturb-mudd-scale $short --mutation-factor 1.02"
expect_call python "--expect-fail --baseline $fid/reference-check-trained.json"
expect_known_flags

# The bank-lr mutation exports pair 0 with NorMuon's learning rate × F and is judged against reference-check.
reset_calls
rm -rf "$fid" "$OUT"
STEPS="reference-check mutation-bank-lr-x1.05" run_script gpu-fidelity 40
expect_status 0
expect_call reference_export "--out $fid/export-mutation-bank-lr-x1.05 $corpus --steps 0 --microbatches 3 \
--perturb-bank-lr --mutation-factor 1.05"
expect_call python "--expect-fail --baseline $fid/reference-check.json"
expect_known_flags

# The side-by-side step waits for the null run and all five seeds.
reset_calls
rm -rf "$fid" "$OUT"
STEPS="seed1 seed2 seed3 weights side-by-side" run_script gpu-fidelity 40
expect_status 0
expect_output "side-by-side: waits for its inputs"
expect_no_call python "scripts/side-by-side"

# A null setting that is not NAME=VALUE fails its step before any run.
reset_calls
rm -rf "$fid" "$OUT"
NULL_SETTING="scatter v1" STEPS="null-seed1" run_script gpu-fidelity 40
expect_failed
expect_output "gpu-fidelity: failed: null-seed1"
[[ ! -e $calls/train_gpt ]] || fail "the null ran with a malformed NULL_SETTING"

# A failing export: its step is marked failed, the mutation waits for its baseline, the call fails.
reset_calls
rm -rf "$fid" "$OUT"
FAKE_FAIL=export STEPS="seed1 reference-check-trained mutation-attention" run_script gpu-fidelity 40
expect_failed
expect_output "^reference-check-trained: failed"
expect_output "^mutation-attention: pending"
expect_output "mutation-attention: waits for its inputs"
expect_output "gpu-fidelity: failed: reference-check-trained"
expect_no_call python "--expect-fail"

# The programs are built only where missing: here they are, and the build fails.
reset_calls
rm -rf "$fid" "$tree/build-cuda"
FAKE_FAIL=build STEPS=seed1 run_script gpu-fidelity 40
expect_failed
expect_output "BUILD FAILED"
[[ ! -e $calls/train_gpt ]] || fail "a step ran after a failed build"

exit $((failures > 0))
