#!/usr/bin/env bash
# scripts/run without GPUs: the embedded default runs `harness record` on the tiny recipe with no --target (the
# recipe's own [record] target decides), prints PASS or FAIL from the harness's verdict with the report's path, and
# exits with the verdict (1 for FAIL), using a stand-in harness that answers with a chosen status.
#   run_default_job_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/scripts" "$work/build/bin" "$work/fakebin"
cp "$source_dir/scripts/run" "$work/scripts/run"
printf '#!/usr/bin/env bash\nexit 1\n' > "$work/fakebin/nvidia-smi"   # no GPU here
chmod +x "$work/fakebin/nvidia-smi"
cat > "$work/build/bin/harness" <<'STUB'
#!/usr/bin/env bash
printf '%s\n' "$@" > "$(dirname "$0")/harness-args"
echo "result: stand-in"
echo "report: /results/reports/record-tiny-x/report.md"
exit "${STUB_STATUS:-0}"
STUB
chmod +x "$work/build/bin/harness"

failures=0
fail() { echo "FAIL: $*"; cat "$work/out.txt"; failures=$((failures + 1)); }
check() {  # check HARNESS_STATUS EXPECTED_EXIT EXPECTED_LINE
  local status=0
  STUB_STATUS=$1 PATH="$work/fakebin:$PATH" SPEEDRUN_RUN_SKIP_SETUP=1 "$work/scripts/run" > "$work/out.txt" 2>&1 ||
    status=$?
  [[ $status -eq $2 ]] || fail "harness status $1: expected exit $2, got $status"
  grep -q "^$3" "$work/out.txt" || fail "harness status $1: expected a line starting '$3'"
  grep -q '^run: report: /results/reports/record-tiny-x/report.md$' "$work/out.txt" || fail "no report path line"
  grep -qx -- '--target' "$work/build/bin/harness-args" && fail "the default job must use the recipe's target"
  grep -qx 'tiny' "$work/build/bin/harness-args" || fail "the default job must run the tiny recipe"
  [[ $(sed -n '/^--runs$/{n;p;q}' "$work/build/bin/harness-args") -ge 4 ]] || fail "fewer than 4 runs (not decidable)"
  echo "ok: harness status $1 -> exit $status"
}
check 0 0 "run: PASS"
check 1 1 "run: FAIL"
check 2 2 "run: the record sweep did not complete"
exit $((failures > 0))
