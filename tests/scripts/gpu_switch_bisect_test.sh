#!/usr/bin/env bash
# scripts/gpu-switch-bisect with stand-ins (tests/scripts/gpu_fakes.sh): one capped train_gpt run per variant with
# the recipe, the proxy settings and `validation.every`; the table names the first non-finite validation and the
# divergence error of each variant and marks the one that stayed finite; every run's files in one tarball; a
# variant file replaces the default variants, and a missing corpus or variant file is a usage error.
#   gpu_switch_bisect_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
# shellcheck source=tests/scripts/gpu_fakes.sh
source "$source_dir/tests/scripts/gpu_fakes.sh"
fakes_setup "$source_dir"
unset RECIPE DATA EVERY LIMIT_S BUDGET_S EXTRA CORPUS_DOCS

# Every run diverges except the one with FP8 off.
FAKE_DIVERGE_UNLESS="fp8=false" run_script gpu-switch-bisect
expect_status 0
expect_known_flags
expect_call cmake "--target train_gpt tokenize"
expect_call train_gpt "--recipe mini-ext --backend cuda --data data/proxy --set data.cycle_train_shards=true"
expect_call train_gpt "--set validation.every=50 --seed 0 --run-id none"
expect_call train_gpt "--set schedule.stages.0.sampled_softmax=[0] --seed 0 --run-id full_softmax_stage0"
expect_call train_gpt "--set extensions.bank_opt=normuon --seed 0 --run-id normuon"
[[ $(wc -l < "$calls/train_gpt") == 8 ]] || fail "expected 8 runs, got: $(cat "$calls/train_gpt")"
table=$OUT/switch-bisect.txt
grep -qE '^none +3 +0:10.7862 +200:nan +diverged: non-finite validation loss at step 200; non-finite state: param 1 of 19 \(lm_head\)' \
  "$table" || fail "the table lacks the diverged row of 'none': $(cat "$table")"
grep -qE '^fp8_off +0 +10:5.0000 +- +-$' "$table" || fail "the table lacks the finite row of 'fp8_off': $(cat "$table")"
tar -tzf "$OUT/switch-bisect.tgz" | grep -q 'fp8_off/fp8_off.txt' || fail "no fp8_off run files in the tarball"
expect_output "fp8_off"

# A variant file, another recipe, no build.
reset_calls
printf '# mine\nfirst --set fp8=false\n\nsecond --set extensions.tail_average=false\n' > "$work/variants.txt"
RECIPE=tiny-ext BUILD=0 run_script gpu-switch-bisect "$work/variants.txt"
expect_status 0
expect_no_call cmake "--build"
expect_call train_gpt "--recipe tiny-ext"
expect_call train_gpt "--set fp8=false --seed 0 --run-id first"
expect_call train_gpt "--set extensions.tail_average=false --seed 0 --run-id second"
[[ $(wc -l < "$calls/train_gpt") == 2 ]] || fail "expected 2 runs, got: $(cat "$calls/train_gpt")"

# Environment switches before a variant's flags reach train_gpt's environment, not its arguments.
reset_calls
printf 'traced SPEEDRUN_ANVIL_TRACE=1 SPEEDRUN_GEMM_AUTOTUNE=0 --set fp8=false\nplain\n' > "$work/env-variants.txt"
BUILD=0 run_script gpu-switch-bisect "$work/env-variants.txt"
expect_status 0
expect_call train_gpt "SPEEDRUN_ANVIL_TRACE=1 SPEEDRUN_GEMM_AUTOTUNE=0 --recipe mini-ext"
expect_call train_gpt "--set validation.every=50 --set fp8=false --seed 0 --run-id traced"
grep -q "^--recipe mini-ext .* --run-id plain" "$calls/train_gpt" || fail "the plain variant got an environment: $(cat "$calls/train_gpt")"
grep -qE '^traced .*$' "$OUT/switch-bisect.txt" && grep -qE '^    anvil trace: step 2, .*matrix 7: .*<-- suspect$' "$OUT/switch-bisect.txt" ||
  fail "the traced variant's suspect update is not under its row: $(cat "$OUT/switch-bisect.txt")"
[[ $(grep -c 'anvil trace' "$OUT/switch-bisect.txt") == 1 ]] || fail "a suspect line under the untraced variant too"

# EXTRA's words are flags for every variant, never an environment.
reset_calls
printf 'traced SPEEDRUN_ANVIL_TRACE=1\n' > "$work/env-only.txt"
EXTRA="--set schedule.warmup=false" BUILD=0 run_script gpu-switch-bisect "$work/env-only.txt"
expect_status 0
expect_call train_gpt "SPEEDRUN_ANVIL_TRACE=1 --recipe mini-ext"
expect_call train_gpt "--set validation.every=50 --set schedule.warmup=false --seed 0 --run-id traced"

# No variant starts that could outlast the budget.
reset_calls
BUILD=0 LIMIT_S=60 BUDGET_S=30 run_script gpu-switch-bisect "$work/variants.txt"
expect_status 0
expect_no_call train_gpt "--run-id"
grep -qE '^second +- +not run: BUDGET_S=30' "$OUT/switch-bisect.txt" || fail "no 'not run' row: $(cat "$OUT/switch-bisect.txt")"

# A misspelt switch fails the run as train_gpt would (exit 2), and the table shows it.
reset_calls
printf 'typo --set extensions.ngram_rowz=0\n' > "$work/typo.txt"
BUILD=0 run_script gpu-switch-bisect "$work/typo.txt"
grep -qE '^typo +2 ' "$OUT/switch-bisect.txt" || fail "the misspelt switch's run did not fail: $(cat "$OUT/switch-bisect.txt")"

reset_calls
BUILD=0 run_script gpu-switch-bisect "$work/no-such-file"
expect_status 2
expect_output "cannot read the variant file"

reset_calls
DATA=$work/no-corpus BUILD=0 run_script gpu-switch-bisect
expect_status 2
expect_output "no corpus at DATA="
expect_no_call train_gpt "--recipe"

exit $((failures > 0))
