#!/usr/bin/env bash
# scripts/check-ops: the real tree passes; a scratch tree with one op whose row in docs/OPS.md is complete passes, and
# each planted defect (no row, a row for no op, a missing file, a test of another op, no CPU test, a CUDA op without
# a GPU test, an unnamed kernels/cuda/OP.cu or tests/kernels/OP_test.cpp) fails naming the op and the defect.
#   check_ops_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
check="$source_dir/scripts/check-ops"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

"$check" "$source_dir" >/dev/null || fail "the real tree's docs/OPS.md does not pass"

tree="$work/tree"
# A tree with the op `scale`: header, dispatch, CPU reference, CUDA kernel, a CPU and a GPU test, a benchmark.
make_tree() {
  rm -rf "$tree"
  mkdir -p "$tree/kernels/cpu" "$tree/kernels/cuda" "$tree/kernels/bench" "$tree/tests/kernels" "$tree/tests/gpu" \
    "$tree/docs"
  printf '#pragma once\n' > "$tree/kernels/scale.h"
  printf '#include "kernels/scale.h"\nvoid scale() { GPT_BACKEND_CALL(d, scale); }\n' > "$tree/kernels/scale.cpp"
  printf '#include "kernels/scale.h"\n' > "$tree/kernels/cpu/scale.cpp"
  printf '#include "kernels/scale.h"\n' > "$tree/kernels/cuda/scale.cu"
  printf '#include "kernels/scale.h"\n' > "$tree/tests/kernels/scale_test.cpp"
  printf '#include "kernels/scale.h"\n' > "$tree/tests/gpu/scale_cuda_test.cpp"
  printf '#include "kernels/scale.h"\n' > "$tree/kernels/bench/ops_bench.cpp"
}
# write_row CUDA CPU_TESTS GPU_TESTS BENCH: docs/OPS.md with the row of `scale`.
write_row() {
  printf '# Ops\n\n| op | header | CPU reference | CUDA | CPU tests | GPU tests | benchmarks |\n|---|---|---|---|---|---|---|\n' \
    > "$tree/docs/OPS.md"
  printf '| `scale` | `kernels/scale.h` | `kernels/cpu/scale.cpp` | %s | %s | %s | %s |\n' "$@" >> "$tree/docs/OPS.md"
}
complete_row() {
  write_row '`kernels/cuda/scale.cu`' '`tests/kernels/scale_test.cpp`' '`tests/gpu/scale_cuda_test.cpp`' \
    '`kernels/bench/ops_bench.cpp`'
}
# expect_fail WHAT TEXT: the check fails and its message has TEXT.
expect_fail() {
  local out
  if out=$("$check" "$tree" 2>&1); then
    fail "$1 passed"
  elif [[ $out != *"$2"* ]]; then
    fail "$1: message does not say '$2': $out"
  fi
}

make_tree && complete_row
"$check" "$tree" >/dev/null 2>&1 || fail "a complete row was refused: $("$check" "$tree" 2>&1)"

make_tree && complete_row && printf '' > "$tree/docs/OPS.md.tmp" && grep -v '^| `scale`' "$tree/docs/OPS.md" \
  > "$tree/docs/OPS.md.tmp" && mv "$tree/docs/OPS.md.tmp" "$tree/docs/OPS.md"
expect_fail "no row" "scale: no row"

make_tree && complete_row && echo '| `gone` | `kernels/gone.h` | `kernels/cpu/gone.cpp` | — | — | — | — |' \
  >> "$tree/docs/OPS.md"
expect_fail "a row for no op" "gone: a row for an op that kernels/ does not have"

make_tree && complete_row && rm "$tree/kernels/bench/ops_bench.cpp"
expect_fail "a missing benchmark" "scale: names kernels/bench/ops_bench.cpp, which does not exist"

make_tree && complete_row && printf '#include "kernels/other.h"\n' > "$tree/tests/gpu/scale_cuda_test.cpp"
expect_fail "a test of another op" "scale: tests/gpu/scale_cuda_test.cpp does not include kernels/scale.h"

make_tree && rm "$tree/tests/kernels/scale_test.cpp" &&
  write_row '`kernels/cuda/scale.cu`' '—' '`tests/gpu/scale_cuda_test.cpp`' '—'
expect_fail "no CPU test" "scale: no CPU test named"

make_tree && rm "$tree/tests/gpu/scale_cuda_test.cpp" &&
  write_row '`kernels/cuda/scale.cu`' '`tests/kernels/scale_test.cpp`' '—' '—'
expect_fail "a CUDA op without a GPU test" "scale: a CUDA implementation without a GPU test named"

make_tree && rm "$tree/tests/gpu/scale_cuda_test.cpp" && write_row '—' '`tests/kernels/scale_test.cpp`' '—' '—'
expect_fail "an unnamed CUDA kernel" "scale: kernels/cuda/scale.cu exists but the CUDA column does not name it"

make_tree && printf '#include "kernels/scale.h"\n' > "$tree/tests/kernels/scale_grad_test.cpp" &&
  write_row '`kernels/cuda/scale.cu`' '`tests/kernels/scale_grad_test.cpp`' '`tests/gpu/scale_cuda_test.cpp`' '—'
expect_fail "an unnamed tests/kernels/OP_test.cpp" \
  "scale: tests/kernels/scale_test.cpp exists but the CPU tests column does not name it"

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "check_ops_test: ok"
