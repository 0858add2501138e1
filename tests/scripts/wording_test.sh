#!/usr/bin/env bash
# scripts/check-wording: the real tree passes; a scratch tree with one line naming an issue, the history of the work
# or a remote tool's call syntax fails naming the file, the line and the rule; facts that look alike pass.
#   wording_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
check="$source_dir/scripts/check-wording"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# The words are put together here so that this file does not trip the check itself.
w_iss="iss""ue" w_ses="ses""sion" hash='#' w_lent="le""nt" w_call="ca""ll" w_att="at""tempts" w_time="ti""me"
w_run="run(""command=" w_carry="car""ry=["

out=$("$check" "$source_dir" 2>&1) || fail "the real tree has wording the check refuses: $out"

tree="$work/tree"
# plant FILE LINE: a tree whose only file is FILE, with LINE as its second line.
plant() {
  rm -rf "$tree" && mkdir -p "$tree/$(dirname "$1")"
  printf 'first line\n%s\n' "$2" > "$tree/$1"
}
# expect_fail FILE LINE RULE: the check fails naming FILE:2 and RULE.
expect_fail() {
  plant "$1" "$2"
  if out=$("$check" "$tree" 2>&1); then
    fail "$1 with '$2' passed"
  elif [[ $out != *"$1:2: $3"* ]]; then
    fail "$1 with '$2': message does not name $1:2 and '$3': $out"
  fi
}
expect_pass() {
  plant "$1" "$2"
  out=$("$check" "$tree" 2>&1) || fail "$1 with '$2' failed: $out"
}

expect_fail kernels/op.cpp "// CPU only for now (${w_iss} 30)." "issue number"
expect_fail kernels/op.cpp "  GPT_CHECK(ok, \"no kernel yet, ${w_iss} ${hash}30\");" "issue number"
expect_fail trainer/x.h "// The watchdog of ${hash}23, item 4." "bare #N reference"
expect_fail README.md "Measured in the eleventh ${w_ses}." "history of the work"
expect_fail results/PERFORMANCE.md "No GPU was ${w_lent} this ${w_ses}." "history of the work"
expect_fail scripts/gpu-x "# Four start ${w_att} were refused; 1,680 s of device ${w_time}." "history of the work"
expect_fail scripts/gpu-x "# Device machine: ${w_run}\"scripts/gpu-x\")" "remote tool syntax"
expect_fail docs/gpu.md "copy it with ${w_carry}\".gpu-extras\"]" "remote tool syntax"
expect_fail docs/gpu.md "one device ${w_call} per row" "history of the work"

# Facts that look alike.
expect_pass docs/ANCHORS.md "The older FlexAttention record ${hash}28 takes 695 ms/step."
expect_pass kernels/cuda/gemm.cpp "  plan->selection = \"heuristic ${hash}0 of \" + std::to_string(found);"
expect_pass kernels/cuda/NOTES.md "A non-${hash}0 candidate won at every shape."
expect_pass results/PERFORMANCE.md "dS / pack / dK·dV ${w_iss} 7.4%, the two dS tiles"
expect_pass harness/report/html.cpp "body{color:${hash}222} .a{fill:\"${hash}637939\"}"
expect_pass scripts/gpu-y "scripts/gpu-${w_ses} writes the JSON; results/PERFORMANCE.md dates each entry."
# Data the project does not write is not read.
expect_pass tests/fixtures/log.txt "${w_iss} 30 in a fetched log"

if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "wording_test: ok"
