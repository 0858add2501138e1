#!/usr/bin/env bash
# scripts/check-format on moved files: in a scratch repository whose main has a file with lines clang-format would
# change, a branch that moves it (git mv) passes when its own changed lines are formatted, and fails naming the file
# when a changed line is not; a plain changed file is still checked. Skips without clang-format.
#   check_format_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
if ! command -v git-clang-format >/dev/null || ! command -v clang-format >/dev/null; then
  echo "check_format_test: skipped (clang-format and git-clang-format not installed)"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

repo="$work/repo"
mkdir -p "$repo/scripts" "$repo/old"
cp "$source_dir/scripts/check-format" "$repo/scripts/"
cp "$source_dir/.clang-format" "$repo/"
cd "$repo"
git init -q -b main
git config user.email test@example.invalid
git config user.name test
# Unformatted lines that no one changes: a move must not make them the branch's business.
printf 'int   untouched_a  =  1 ;\nint   untouched_b  =  2 ;\nint kept = 3;\n' > old/moved.cpp
printf 'int plain = 1;\n' > old/plain.cpp
git add -A && git commit -q -m base
git checkout -q -b branch

mkdir -p new
git mv old/moved.cpp new/moved.cpp
sed -i 's/^int kept = 3;$/int changed = 4;/' new/moved.cpp
git commit -q -am "move, one formatted change"
out=$(scripts/check-format 2>&1) || fail "a move with a formatted change failed: $out"

sed -i 's/^int changed = 4;$/int   changed  =  4 ;/' new/moved.cpp
git commit -q -am "an unformatted change in the moved file"
if out=$(scripts/check-format 2>&1); then
  fail "an unformatted changed line of a moved file passed"
elif [[ $out != *"new/moved.cpp"* || $out == *"-int   untouched_a"* ]]; then
  fail "the message does not name new/moved.cpp, or names its untouched lines: $out"
fi
git checkout -q HEAD~1 -- new/moved.cpp && git commit -q -am "formatted again"

printf 'int   plain  =  2 ;\n' > old/plain.cpp
git commit -q -am "an unformatted change in a file that stays"
if out=$(scripts/check-format 2>&1); then
  fail "an unformatted changed line of a file that was not moved passed"
elif [[ $out != *"old/plain.cpp"* ]]; then
  fail "the message does not name old/plain.cpp: $out"
fi

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "check_format_test: ok"
