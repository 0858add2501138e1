# shellcheck shell=bash
# Stand-ins for the tests of scripts/gpu-* (tests/scripts/gpu_*_test.sh), sourced after `set -uo pipefail`:
#   source "$source_dir/tests/scripts/gpu_fakes.sh"
#   fakes_setup "$source_dir"    # $tree: a scratch checkout (scripts/, CMakePresets.json, data/proxy); $fakebin on
#                                # PATH first; $calls/NAME: one line per call of NAME, its arguments
#   run_script gpu-probe ARGS...  # runs $tree/scripts/gpu-probe, output in $work/out.txt, exit status in $status
#
# The scripts run as on a GPU machine, with stand-ins for the machine's tools (nvidia-smi, nvcc, ncu, dpkg, a python
# for the reference scripts) and the build's (cmake, ctest). The stand-in `cmake --build` "builds" a target only
# where the project has its source (trainer/apps/T.cpp → build-cuda/bin/T, and so on, as the CMakeLists place them),
# so a target the project no longer has fails the build as it would there. The programs it installs record their
# arguments and check every --flag against the program's source (a CLI11 `add_option("--flag"` or a
# `a == "--flag"`; a --set key against trainer/recipe/recipe_keys.cpp and trainer/run/run_options.cpp): a renamed
# flag fails as the program would, with exit status 2.
# Knobs: FAKE_FAIL=WHAT[,WHAT] makes a step fail: configure, build, ctest, ctest-attention, harness-run, bench
# (train_step_bench), kernel-bench (the Google Benchmark programs), ncu, train_gpt, export (reference_export),
# python (the reference scripts); FAKE_RUN_SECONDS is the length of the stand-in training run; FAKE_DIVERGE_UNLESS
# (train_gpt) makes every run whose arguments lack that text diverge.

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tree=$work/tree
fakebin=$work/fakebin
calls=$work/calls
failures=0
status=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# called NAME PATTERN: some recorded call of NAME contains PATTERN (fixed string).
called() { grep -qF -- "$2" "$calls/$1" 2>/dev/null; }
expect_call() { called "$1" "$2" || fail "no call of $1 with '$2'; calls: $(cat "$calls/$1" 2>/dev/null)"; }
expect_no_call() { ! called "$1" "$2" || fail "a call of $1 with '$2': $(grep -F -- "$2" "$calls/$1")"; }
expect_output() { grep -qE -- "$1" "$work/out.txt" || fail "output lacks /$1/: $(tail -20 "$work/out.txt")"; }
expect_status() {
  [[ $status == "$1" ]] || fail "exit status $status, expected $1; output: $(tail -20 "$work/out.txt")"
}
expect_failed() { [[ $status != 0 ]] || fail "exit status 0, expected a failure; output: $(tail -20 "$work/out.txt")"; }
# No stand-in program met a flag its source does not declare.
expect_known_flags() {
  if grep -qs 'UNKNOWN FLAG' "$calls"/*; then fail "unknown flags: $(grep -h 'UNKNOWN FLAG' "$calls"/*)"; fi
}

run_script() {
  local name=$1
  shift
  status=0
  (cd "$work" && "$tree/scripts/$name" "$@") > "$work/out.txt" 2>&1 || status=$?
}

# reset_calls: forget the calls recorded so far (between two runs of a script in one test).
reset_calls() { rm -rf "$calls" && mkdir -p "$calls"; }

fakes_setup() {
  local source_dir=$1
  mkdir -p "$tree/data/proxy" "$tree/data/tokenizer" "$fakebin" "$calls" "$work/standin"
  cp -r "$source_dir/scripts" "$tree/scripts"
  cp "$source_dir/CMakePresets.json" "$tree/"
  export FAKE_SOURCE_DIR=$source_dir FAKE_CALLS=$calls FAKE_STANDIN=$work/standin/program
  export PATH="$fakebin:$PATH" OUT=$work/out NCCL_ROOT=$work/nccl SPEEDRUN_REVISION=0123456789abcdef
  export SPEEDRUN_DEPS_PREFIX=$work/deps FAKE_FAIL=${FAKE_FAIL:-}
  unset CMAKE_PREFIX_PATH CTEST_LIMIT HEAD_RUN_DIR FIDELITY_WORK TESTS BUILD STEPS

  # record NAME ARGS...: one line in $calls/NAME (the arguments joined by spaces, SPEEDRUN_* variables first).
  cat > "$fakebin/fake-record" << 'EOF'
#!/usr/bin/env bash
name=$1; shift
{ env | grep -E '^SPEEDRUN_(ATTENTION|MIX|SCATTER|GEMM|ANVIL)' | sort | tr '\n' ' '; echo "$*"; } >> "$FAKE_CALLS/$name"
EOF
  cat > "$fakebin/fake-failing" << 'EOF'
#!/usr/bin/env bash
[[ ,$FAKE_FAIL, == *",$1,"* ]]
EOF

  cat > "$fakebin/nvidia-smi" << 'EOF'
#!/usr/bin/env bash
fake-record nvidia-smi "$@"
case "$*" in
  *--query-gpu=name\ *noheader*) echo "NVIDIA H100 80GB HBM3" ;;
  *--query-gpu=driver_version\ *noheader*) echo "580.159.04" ;;
  *) echo "name, driver_version"; echo "NVIDIA H100 80GB HBM3, 580.159.04" ;;
esac
EOF
  printf '#!/usr/bin/env bash\nfake-record nvcc "$@"\necho "Cuda compilation tools, release 13.0, V13.0.88"\n' \
    > "$fakebin/nvcc"
  cat > "$fakebin/dpkg" << 'EOF'
#!/usr/bin/env bash
fake-record dpkg "$@"
[[ $1 == -x ]] && mkdir -p "$3/usr/lib/x86_64-linux-gnu" && touch "$3/usr/lib/x86_64-linux-gnu/$(basename "$2").so"
EOF

  # cmake: --preset NAME (must be a configure preset of CMakePresets.json) and --build DIR [-j N] [--target T...].
  cat > "$fakebin/cmake" << 'EOF'
#!/usr/bin/env bash
fake-record cmake "$@"
src=$FAKE_SOURCE_DIR
if [[ $1 == --version ]]; then echo "cmake version 3.31.6"; exit 0; fi
if [[ $1 == --preset ]]; then
  grep -q "\"name\": \"$2\"" CMakePresets.json || { echo "CMake Error: No such preset \"$2\""; exit 1; }
  fake-failing configure && { echo "CMake Error at CMakeLists.txt:1 (find_package): Could not find GTest"; exit 1; }
  mkdir -p build-cuda && echo "-- Build files have been written to: build-cuda"
  exit 0
fi
[[ $1 == --build && $2 == build-cuda ]] || { echo "fake cmake: unexpected arguments $*"; exit 1; }
shift 2
targets=()
while (($#)); do
  case $1 in
    -j) shift 2 ;;
    --target) shift; while (($#)) && [[ $1 != -* ]]; do targets+=("$1"); shift; done ;;
    *) echo "fake cmake: unexpected build argument $1"; exit 1 ;;
  esac
done
((${#targets[@]})) || targets=(train_gpt reference_export harness gpu_tests ladder_tests train_step_bench gemm_bench
                                attention_bench ops_a_cuda_bench)
fake-failing build && { echo "kernels/x.cu(1): error: identifier undefined"; exit 2; }
for t in "${targets[@]}"; do
  if [[ -f $src/trainer/apps/$t.cpp || -f $src/harness/apps/$t.cpp ]]; then out=build-cuda/bin/$t
  elif [[ -f $src/trainer/bench/$t.cpp ]]; then out=build-cuda/trainer/$t
  elif [[ -f $src/kernels/bench/$t.cu || -f $src/kernels/bench/$t.cpp ]]; then out=build-cuda/kernels/bench/$t
  elif [[ $t == *_tests && -d $src/tests/${t%_tests} ]]; then out=build-cuda/tests/$t
  else echo "make: *** No rule to make target '$t'.  Stop."; exit 2
  fi
  mkdir -p "$(dirname "$out")" && ln -sf "$FAKE_STANDIN" "$out"
done
echo "[100%] Built target ${targets[*]}"
EOF

  cat > "$fakebin/ctest" << 'EOF'
#!/usr/bin/env bash
fake-record ctest "$@"
what=ctest
[[ " $* " == *" -R Attention "* ]] && what=ctest-attention
if fake-failing "$what"; then
  h='#'  # ctest's own format (the test number after a hash)
  echo "1/2 Test ${h}1: AttentionGpu.Forward .............***Failed    0.02 sec"
  echo "2/2 Test ${h}2: ModelCuda.Loss ...................   Passed    0.02 sec"
  echo
  echo "50% tests passed, 1 tests failed out of 2"
  echo
  echo "The following tests FAILED:"
  printf '\t%3d - %s (Failed)\n' 1 AttentionGpu.Forward
  exit 8
fi
echo "100% tests passed, 0 tests failed out of 2"
EOF

  # ncu OPTIONS PROGRAM ARGS: runs the program (so that its flags are checked) and prints the duration rows of a
  # reference GEMM and two step kernels.
  cat > "$fakebin/ncu" << 'EOF'
#!/usr/bin/env bash
fake-record ncu "$@"
fake-failing ncu && { echo "==ERROR== profiling failed" >&2; exit 1; }
while (($#)) && [[ $1 != build-cuda/* ]]; do shift; done
(($#)) && { "$@" > /dev/null || exit 1; }
echo '==PROF== Connected to process'
echo '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
echo '"0","sm90_xmma_gemm_bf16(params)","gpu__time_duration.sum","ns","2,000,000"'
echo '"1","void gpt::<unnamed>::rmsnorm_kernel<float>(args)","gpu__time_duration.sum","ns","1,000"'
echo '"2","void gpt::attention_forward_kernel<64>(args)","gpu__time_duration.sum","ns","5,000"'
echo '"3","void gpt::<unnamed>::rmsnorm_kernel<float>(args)","gpu__time_duration.sum","ns","1,500"'
EOF

  # The programs cmake installs: one script, behaving by the name it is called as.
  cat > "$work/standin/program" << 'EOF'
#!/usr/bin/env bash
name=$(basename "$0")
fake-record "$name" "$@"
src=$FAKE_SOURCE_DIR
case $name in
  harness)  # the global options and those of the subcommand given
    sub=""
    for a in "$@"; do [[ $a == record || $a == nightly ]] && { sub=$a; break; }; done
    sources=("$src/harness/commands/common.cpp" "$src/harness/commands/$sub.cpp") ;;
  train_gpt) sources=("$src/trainer/apps/train_gpt.cpp" "$src/trainer/run/trainer_program.cpp" "$src/base") ;;
  reference_export) sources=("$src/trainer/apps/reference_export.cpp" "$src/base") ;;
  train_step_bench) sources=("$src/trainer/bench/train_step_bench.cpp") ;;
  *) sources=() ;;  # Google Benchmark and GoogleTest programs: their flags are the libraries'
esac
value() {  # value FLAG ARGS...: the argument after FLAG
  local flag=$1; shift
  while (($#)); do [[ $1 == "$flag" ]] && { echo "$2"; return; }; shift; done
}
if ((${#sources[@]})); then
  # CLI11's names may list aliases ("-r,--runs"); train_step_bench compares each argument.
  # Sources joined into one line first: clang-format may break `add_option(` and its name onto two lines.
  declared=" $(grep -rhs -- '' "${sources[@]}" | tr '\n' ' ' |
               grep -oE -- '(add_option|add_flag)\([[:space:]]*"[^"]*"|== "--[A-Za-z0-9-]+"' |
               grep -oE -- '--[A-Za-z0-9-]+' | tr '\n' ' ')"
  prev=""
  for a in "$@"; do
    if [[ $a == --* && $declared != *" $a "* ]]; then
      echo "UNKNOWN FLAG $name $a" | tee -a "$FAKE_CALLS/$name" >&2; exit 2
    fi
    key=${a%%=*}
    [[ $key =~ ^schedule\.stages\.[0-9]+\.(.+)$ ]] && key=${BASH_REMATCH[1]}  # a stage's key, declared bare
    if [[ $prev == --set ]] &&
       ! grep -qF "\"$key\"" "$src/trainer/recipe/recipe_keys.cpp" "$src/trainer/run/run_options.cpp"; then
      echo "UNKNOWN FLAG $name --set ${a%%=*}" | tee -a "$FAKE_CALLS/$name" >&2; exit 2
    fi
    prev=$a
  done
fi
fails() { [[ ,$FAKE_FAIL, == *",$1,"* ]]; }
case $name in
  harness)
    if [[ " $* " == *" record "* ]]; then
      db=$(value --db "$@"); sweep=$(value --name "$@"); root=$(dirname "$db"); id=$sweep-seed0
      read -r -a stat < /proc/$$/stat  # fields 5 and 6: process group and sid, both its own pid after setsid
      [[ ${stat[4]} == "$$" && ${stat[5]} == "$$" ]] && echo "detached" >> "$FAKE_CALLS/harness-detached"
      mkdir -p "$root/runs/$sweep/$id" "$root/reports/$sweep"
      echo "step:1/1285 train_time:300ms step_avg:300.00ms" > "$root/runs/$sweep/$id/$id.txt"
      sleep "${FAKE_RUN_SECONDS:-0}"
      fails harness-run && { echo "run $id failed: exit 1"; exit 1; }
      echo "step:1285/1285 val_loss:7.8490 train_time:648600ms step_avg:504.75ms" >> "$root/runs/$sweep/$id/$id.txt"
      cat > "$root/runs/$sweep/$id/$id.json" << JSON
{"run_id": "$id", "status": "finished", "final_val_loss": 7.849, "train_time_ms": 648600.0, "steps": 1285,
 "total_steps": 1285, "peak_memory": {"allocated_mib": 41967, "reserved_mib": 80405},
 "stage_times": [{"stage": 0, "first_step": 0, "steps": 423, "train_time_ms": 115902.0, "ms_per_step": 274.0},
                 {"stage": 1, "first_step": 423, "steps": 424, "train_time_ms": 200000.0, "ms_per_step": 471.7},
                 {"stage": 2, "first_step": 847, "steps": 438, "train_time_ms": 332698.0, "ms_per_step": 759.6}]}
JSON
      echo "# report" > "$root/reports/$sweep/report.md"
      echo "verdict: NOT A RECORD"
    fi
    ;;
  train_step_bench)
    fails bench && { echo "train_step_bench: CUDA error: out of memory" >&2; exit 1; }
    json=$(value --json "$@"); only=$(value --only "$@"); fp8=$(value --fp8 "$@"); trace=$(value --kernel-trace "$@")
    only=${only:-stage2,stage0} fp8=${fp8:-both}  # its defaults
    rows=""
    for stage in ${only//,/ }; do
      for f in true false; do
        [[ $fp8 == on && $f == false || $fp8 == off && $f == true ]] && continue
        echo "$stage fp8=$f: T=49152 x 8, windows 640/1408"
        echo "  500.0 ms/step (fwd 150.0, bwd 330.0, opt 20.0), 786432 tok/s"
        if [[ -n $trace ]]; then  # --kernel-trace: one traced step, its intervals as CSV
          echo "  traced step: 500.0 ms (event-timed), GPU busy 0.0 ms, idle 500.0 ms (100.0%); 3 kernels, 1 copies"
          sed 's/^ *//' > "$trace-$stage-fp8$([[ $f == true ]] && echo on || echo off).csv" << CSV
kind,start_ns,end_ns,name
kernel,0,30000,"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
kernel,30000,40000,"void gpt::(anonymous namespace)::rmsnorm_kernel<float>(float const*, int)"
memcpy,45000,46000,"[memcpy HtoD]"
kernel,50000,60000,"void gpt::(anonymous namespace)::rmsnorm_kernel<float>(float const*, int)"
CSV
        fi
        # FAKE_STEP_MS, FAKE_STEP_LOSS: the row's step time and losses (a setting under test in scripts/gpu-step-ab).
        rows+="${rows:+,}{\"shape\": \"$stage\", \"fp8\": $f, \"ms_per_step\": ${FAKE_STEP_MS:-500.0},"
        rows+=" \"losses\": [${FAKE_STEP_LOSS:-10.5}, 9.25], \"forward_ms\": 150.0,"
        rows+=" \"backward_ms\": 330.0, \"optimizer_ms\": 20.0, \"tokens_per_s\": 786432.0, \"model_tflop_s\": 500.0,"
        rows+=" \"mfu_vs_989\": 0.5, \"mfu_vs_measured_gemm\": 0.6, \"peak_allocated_mib\": 40000}"
      done
    done
    [[ -n $json ]] && cat > "$json" << JSON
{"context": {"date": "2026-12-07T05:00:00+00:00", "executable": "train_step_bench", "git_commit": "0123456"},
 "device": "NVIDIA H100 80GB HBM3", "data": "$(value --data "$@")", "measured_gemm_bf16_tflop_s": 700.0,
 "results": [$rows],
 "benchmarks": [{"name": "BM_TrainStep/stage2/fp8:on/data:loader", "run_type": "iteration", "real_time": 500.0,
                 "time_unit": "ms"}]}
JSON
    ;;
  train_gpt)
    fails train_gpt && { echo "train_gpt: cudaErrorIllegalAddress" >&2; exit 1; }
    out=$(value --out "$@"); id=$(value --run-id "$@")
    mkdir -p "$out"
    # SPEEDRUN_ANVIL_TRACE=1: one suspect update, as kernels/anvil.cpp prints it.
    [[ ${SPEEDRUN_ANVIL_TRACE:-} == 1 ]] && echo "anvil trace: step 2, stack 20x768x768, matrix 7: |X|_F 0.5 after \
the momentum (0 non-finite), 0.95 after the trace scaling (0 non-finite), max |X| nan after the maps (9 non-finite)  \
<-- suspect" >&2
    # FAKE_DIVERGE_UNLESS=TEXT: a run whose arguments lack TEXT validates NaN at step 200 and diverges (exit 3).
    if [[ -n ${FAKE_DIVERGE_UNLESS:-} && " $* " != *"$FAKE_DIVERGE_UNLESS"* ]]; then
      printf 'step:0/1194 val_loss:10.7862 train_time:682ms\nstep:200/1194 val_loss:nan train_time:8577ms\n' > "$out/$id.txt"
      echo "train_gpt: diverged: non-finite validation loss at step 200; non-finite state: param 1 of 19 (lm_head)" >&2
      exit 3
    fi
    echo "step:10/10 val_loss:5.0000 train_time:1000ms step_avg:100.00ms" > "$out/$id.txt"
    echo "{\"run_id\": \"$id\", \"status\": \"finished\"}" > "$out/$id.json"
    every=$(value --checkpoint-every "$@")
    [[ -n $every ]] && touch "$out/$id.step$(printf %06d "$every").ckpt"
    ;;
  reference_export)
    fails export && { echo "reference_export: failed" >&2; exit 1; }
    mkdir -p "$(value --out "$@")" && echo "{}" > "$(value --out "$@")/manifest.json"
    ;;
  *_tests)
    echo "[ RUN      ] ModelCuda.TinyLossCurve"
    echo "[       OK ] ModelCuda.TinyLossCurve (10 ms)"
    ;;
  *_bench)  # Google Benchmark: --benchmark_out=FILE
    fails kernel-bench && { echo "CUDA error: an illegal memory access was encountered" >&2; exit 1; }
    out=""
    for a in "$@"; do [[ $a == --benchmark_out=* ]] && out=${a#--benchmark_out=}; done
    echo "BM_${name}/version:1   1.00 ms   1.00 ms   100 label"
    [[ -n $out ]] && cat > "$out" << JSON
{"context": {"date": "2026-12-07T05:00:00+00:00", "executable": "$name"},
 "benchmarks": [
  {"name": "BM_AttentionForward/version:4/window:640", "real_time": 1.0, "time_unit": "ms", "TFLOP/s": 400.0,
   "label": "v4 (promoted fa3)", "vs_dense_gemm": 0.5, "floor_us": 500.0},
  {"name": "BM_AttentionBackward/version:7/window:640", "real_time": 2.0, "time_unit": "ms",
   "label": "v7 (candidate deferred_dq)"},
  {"name": "BM_GemmBf16/m:8192/n:8192/k:8192", "real_time": 1.5, "time_unit": "ms", "TFLOP/s": 700.0,
   "label": "algo 0"},
  {"name": "BM_MixBackwardResidual/version:4/manual_time", "real_time": 0.1, "time_unit": "ms", "label": ""},
  {"name": "BM_MixForwardResidual/version:1/manual_time", "real_time": 0.1, "time_unit": "ms", "label": ""}]}
JSON
    ;;
esac
exit 0
EOF

  # A python for the reference scripts (gpu-fidelity's PYTHON): checks the flags against the script it is given.
  cat > "$fakebin/fake-python" << 'EOF'
#!/usr/bin/env bash
fake-record python "$@"
script=$1; shift
for a in "$@"; do
  if [[ $a == --* ]] && ! grep -qF -- "\"$a\"" "$FAKE_SOURCE_DIR/$script"; then
    echo "UNKNOWN FLAG python $script $a" | tee -a "$FAKE_CALLS/python" >&2; exit 2
  fi
done
[[ ,$FAKE_FAIL, == *,python,* ]] && { echo "reference check: FAIL (3 rows)"; exit 1; }
out=""; prev=""
for a in "$@"; do [[ $prev == --out ]] && out=$a; prev=$a; done
mkdir -p "$out"
case $script in
  scripts/reference-check) echo '{"pass": true}' > "$out/reference-check.json"; echo "reference check: PASS" ;;
  scripts/side-by-side) echo '{}' > "$out/side-by-side.json"; echo "side by side: within the seed band"
                       echo "paired training losses: PASS (stand-in)" ;;
esac
EOF
  # The scripts' own python3 (tables, JSON): the system's, started directly (a version manager's shim can take
  # seconds per start).
  local python
  python=$(command -v /usr/bin/python3 python3 | head -1)
  printf '#!/bin/sh\nexec %s "$@"\n' "$python" > "$fakebin/python3"
  chmod +x "$fakebin"/* "$work/standin/program"
}
