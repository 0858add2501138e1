#!/usr/bin/env bash
# scripts/check-recipe-refs: every `§` the real tree cites has its section in docs/RECIPE.md; in a scratch tree, a
# removed heading or numbered item fails naming the section and the citing file, and an uncited section may go.
#   recipe_sections_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
check="$source_dir/scripts/check-recipe-refs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
s='§'  # written apart from the numbers, so that this file cites no section of its own

out=$("$check" "$source_dir" 2>&1) || fail "the real tree cites sections that docs/RECIPE.md lacks: $out"

# A scratch tree: the real docs/RECIPE.md, edited by SED, and one source citing CITED.
tree="$work/tree"
scratch() {
  local sed_script=$1 cited=$2
  rm -rf "$tree" && mkdir -p "$tree/docs" "$tree/trainer/x"
  sed "$sed_script" "$source_dir/docs/RECIPE.md" > "$tree/docs/RECIPE.md"
  printf '// Follows RECIPE %s.\n' "$cited" > "$tree/trainer/x/op.cpp"
}
# expect_fail SED CITED SECTION: the check fails and names SECTION and trainer/x/op.cpp:1.
expect_fail() {
  scratch "$1" "$2"
  if out=$("$check" "$tree" 2>&1); then
    fail "citing $2 with '$1' applied passed"
  elif [[ $out != *"§$3 has no heading"* || $out != *"trainer/x/op.cpp:1"* ]]; then
    fail "citing $2 with '$1': message does not name §$3 and trainer/x/op.cpp:1: $out"
  fi
}
expect_pass() {
  scratch "$1" "$2"
  out=$("$check" "$tree" 2>&1) || fail "citing $2 with '$1' applied failed: $out"
}

expect_pass '' '§5.1'
expect_fail '/^### §5\.1 /d' '§5.1' '5.1'
expect_fail '/^### §S\.10 /d' '§S.10, after §S.9' 'S.10'
expect_fail '' "${s}5.9" '5.9'
# Numbered items: §2.9.7 is step 7 of §2.9 and resolves while that step is there.
expect_pass '' '§2.9.7 and §U.6'
expect_fail 's/^7\. \*\*Attention core/Attention core/' '§2.9.7' '2.9.7'
# A section nobody cites may go (here 10.3: only its own heading names it).
expect_pass '/^### §10\.3 /d' '§5.1'
# Citations in data the project does not write (fixtures, fuzz inputs, benchmark JSON) are not checked.
scratch '' '§5.1'
mkdir -p "$tree/tests/fixtures" && echo "${s}99.9" > "$tree/tests/fixtures/x.txt"
out=$("$check" "$tree" 2>&1) || fail "a fixture citing section 99.9 failed the check: $out"

if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "recipe_sections_test: ok"
