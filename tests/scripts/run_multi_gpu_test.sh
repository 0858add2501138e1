#!/usr/bin/env bash
# scripts/run on a multi-GPU host, with `nvidia-smi -L` faked on PATH and stand-ins for the built programs: the
# record sweep must ask for a rank count that divides 8 (RECIPE §8), the largest the host has, both from the
# harness (--gpus) and in the trainer's command (--gpus), so that every launch is one train_gpt can run.
#   run_multi_gpu_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/scripts" "$work/build/bin" "$work/data/fineweb10B" "$work/fakebin"
cp "$source_dir/scripts/run" "$work/scripts/run"
touch "$work/data/fineweb10B/fineweb_val_000000.bin"
cat > "$work/build/bin/harness" <<'STUB'
#!/usr/bin/env bash
printf '%s\n' "$@" > "$(dirname "$0")/harness-args"
STUB
chmod +x "$work/build/bin/harness"

failures=0
check() {  # check VISIBLE_GPUS EXPECTED_RANKS
  local visible=$1 expected=$2
  cat > "$work/fakebin/nvidia-smi" <<STUB
#!/usr/bin/env bash
[[ "\${1:-}" == "-L" ]] || exit 1
for ((i = 0; i < $visible; i++)); do echo "GPU \$i: NVIDIA H100 80GB HBM3 (UUID: GPU-fake-\$i)"; done
STUB
  chmod +x "$work/fakebin/nvidia-smi"
  rm -f "$work/build/bin/harness-args"
  PATH="$work/fakebin:$PATH" SPEEDRUN_RUN_SKIP_SETUP=1 "$work/scripts/run" > "$work/out.txt" 2>&1 || {
    echo "FAIL: scripts/run with $visible GPUs exited non-zero:"; cat "$work/out.txt"; failures=$((failures + 1)); return; }
  local args
  args=$(tr '\n' ' ' < "$work/build/bin/harness-args")
  # harness record --gpus N ... -- train_gpt ... --gpus N ...
  local harness_gpus trainer_gpus
  harness_gpus=$(sed -n '/^--gpus$/{n;p;q}' "$work/build/bin/harness-args")
  trainer_gpus=$(sed -n '/^--$/,${/^--gpus$/{n;p}}' "$work/build/bin/harness-args" | tail -1)
  if [[ "$harness_gpus" != "$expected" || "$trainer_gpus" != "$expected" ]]; then
    echo "FAIL: $visible GPUs: expected --gpus $expected for the harness and the trainer, got: $args"
    failures=$((failures + 1))
  else
    echo "ok: $visible GPUs -> --gpus $expected"
  fi
}
check 8 8
check 6 4
check 4 4
check 3 2
check 2 2
check 1 1
exit $((failures > 0))
