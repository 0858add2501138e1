#!/usr/bin/env bash
# scripts/check-format in a scratch repository: passes when every tracked C++/CUDA file is formatted; fails naming
# the one tracked file that is not (an untracked one and the fuzz corpus are not its business) and printing its
# diff; checks the files given as arguments instead of the tree; refuses a clang-format of another major version
# than the pinned one. Skips without clang-format 14.
#   check_format_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
if ! command -v clang-format-14 >/dev/null && ! clang-format --version 2>/dev/null | grep -q 'version 14\.'; then
  echo "check_format_test: skipped (clang-format 14 not installed)"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

repo="$work/repo"
mkdir -p "$repo/scripts" "$repo/src" "$repo/tests/fuzz/corpus"
cp "$source_dir/scripts/check-format" "$repo/scripts/"
cp "$source_dir/.clang-format" "$repo/"
cd "$repo"
git init -q -b main
git config user.email test@example.invalid
git config user.name test
printf 'int formatted = 1;\n' > src/a.cpp
printf '__global__ void k(float* x) { x[0] = 1.0f; }\n' > src/b.cu
printf 'int   corpus  =  1 ;\n' > tests/fuzz/corpus/input.cpp
git add -A && git commit -q -m base
printf 'int   untracked  =  1 ;\n' > src/untracked.cpp

out=$(scripts/check-format 2>&1) || fail "a formatted tree failed: $out"
[[ $out == *"2 file(s) formatted"* ]] || fail "expected 2 tracked files checked (corpus and untracked left out): $out"

printf 'int   unformatted  =  2 ;\n' > src/c.h
git add src/c.h && git commit -q -m "an unformatted header"
if out=$(scripts/check-format 2>&1); then
  fail "an unformatted tracked file passed"
elif [[ $out != *"1 of 3 file(s) not formatted"*"src/c.h"* || $out != *"-int   unformatted  =  2 ;"* ]]; then
  fail "the message does not name src/c.h with its diff: $out"
fi
out=$(scripts/check-format src/a.cpp 2>&1) || fail "the formatted file given alone failed: $out"

# Another major version lays some constructs out differently: refused, naming what was found.
mkdir -p "$work/bin"
for name in clang-format clang-format-14; do  # stand-ins that report another version, found first
  printf '#!/bin/sh\necho "Debian clang-format version 19.1.7"\n' > "$work/bin/$name"
  chmod +x "$work/bin/$name"
done
if out=$(PATH="$work/bin:$PATH" scripts/check-format src/a.cpp 2>&1); then
  fail "clang-format 19 was accepted"
elif [[ $out != *"needs clang-format 14"*"version 19.1.7"* ]]; then
  fail "the version refusal does not name both versions: $out"
fi

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "check_format_test: ok"
