#!/usr/bin/env bash
# scripts/check-includes: the real tree passes; a scratch tree with one include against each rule fails, and the
# message names the file, the line and the rule; an allowed include in the same places passes.
#   check_includes_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
check="$source_dir/scripts/check-includes"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

"$check" "$source_dir" >/dev/null || fail "the real tree has includes against the arrows"

# plant FILE INCLUDE RULE_TEXT: a tree whose only source is FILE with INCLUDE must fail naming FILE:2 and RULE_TEXT.
plant() {
  local file=$1 include=$2 rule=$3 tree="$work/tree" out
  rm -rf "$tree" && mkdir -p "$tree/$(dirname "$file")"
  printf '#pragma once\n%s\n' "$include" > "$tree/$file"
  if out=$("$check" "$tree" 2>&1); then
    fail "$file with '$include' passed"
  elif [[ $out != *"$file:2"* || $out != *"$rule"* ]]; then
    fail "$file with '$include': message does not name $file:2 and '$rule': $out"
  fi
}
plant base/check.h '#include "kernels/tensor.h"' "base/ includes nothing of the project"
plant kernels/cpu/op.cpp '#include "trainer/model/model.h"' "kernels/ depends on base/ only"
plant harness/report/table.cpp '#include "kernels/tensor.h"' "harness/ depends on base/ only"
plant harness/x.h '  #  include "trainer/run/training_run.h"' "harness/ depends on base/ only"
plant trainer/run/x.cpp '#include "harness/store/store.h"' "trainer/ never includes harness/"
plant trainer/data/loader.cpp '#include "trainer/model/model.h"' "trainer/data/ sits below"
plant trainer/comm/comm_factory.h '#include "trainer/run/launch_env.h"' "trainer/comm/ sits below"
plant trainer/model/model.h '#include "trainer/optim/optimizer.h"' "trainer/model/ sits below"
plant trainer/model/x.cu '#include <cuda_runtime.h>' "trainer/model/ reaches CUDA only through kernels/*.h"
plant trainer/model/x.cpp '#include "kernels/cuda/runtime.h"' "trainer/model/ reaches CUDA only through kernels/*.h"
plant trainer/optim/optimizer.cpp '#include "trainer/run/training_run.h"' "trainer/optim/ sits below the step runner"
plant trainer/optim/optimizer.cpp '#include "trainer/step/step_runner.h"' "trainer/optim/ sits below the step runner"
plant trainer/model/model.cpp '#include "trainer/step/trainable_model.h"' "trainer/model/ sits below"
plant trainer/step/step_runner.cpp '#include "trainer/run/training_run.h"' "trainer/step/ sits below the run loop"
plant trainer/step/step_runner.cpp '#include "trainer/gpt/gpt_trainable.h"' "trainer/step/ sits below the run loop"
plant trainer/gpt/gpt_trainable.cpp '#include "trainer/run/training_run.h"' "trainer/gpt/ sits below the run loop"
plant trainer/export/batch_dump.cpp '#include "trainer/run/training_run.h"' "trainer/export/ sits below"
plant trainer/run/training_run.cpp '#include "trainer/tools/reference_export.h"' "trainer/run/ sits below the programs"
plant kernels/cuda/attention/forward.cu '#include "kernels/cuda/ladder/attention_versions.h"' "include the kernel ladder"
plant tests/gpu/attention_gpu_test.cpp '#include "kernels/cuda/ladder/attention_versions.h"' "include the kernel ladder"
# Inside harness/, an include up or sideways (between folders of one level) fails.
plant harness/launcher/process.cpp '#include "harness/record/sweep_runner.h"' "harness/launcher/ includes only the harness folders below it"
plant harness/render/svg.cpp '#include "harness/report/html_page.h"' "harness/render/ includes only the harness folders below it"
plant harness/store/store.cpp '#include "harness/logparse/logparse.h"' "harness/store/ includes only the harness folders below it"
plant harness/nightly/night.cpp '#include "harness/report/site.h"' "harness/nightly/ includes only the harness folders below it"
plant harness/record/harvest.h '#include "harness/nightly/night.h"' "harness/record/ includes only the harness folders below it"
plant harness/report/site.cpp '#include "harness/commands/common.h"' "harness/report/ includes only the harness folders below it"
plant harness/commands/query.cpp '#include "harness/apps/x.h"' "harness/commands/ includes only the harness folders below it"
# A harness folder with no level fails, named.
rm -rf "$work/tree" && mkdir -p "$work/tree/harness/extra"
printf '#include "base/check.h"\n' > "$work/tree/harness/extra/x.cpp"
if out=$("$check" "$work/tree" 2>&1); then
  fail "a harness folder without a level passed"
elif [[ $out != *"harness/extra/"*"every harness folder has a level"* ]]; then
  fail "harness/extra/: message does not name the folder and the rule: $out"
fi

# Allowed arrows in the same places pass.
rm -rf "$work/ok" && mkdir -p "$work/ok/harness" "$work/ok/trainer/model" "$work/ok/kernels"
printf '#include "base/check.h"\n#include <vector>\n' > "$work/ok/harness/a.cpp"
mkdir -p "$work/ok/base"
printf '#include "base/check.h"\n#include <spdlog/spdlog.h>\n' > "$work/ok/base/log.cpp"
printf '#include "kernels/tensor.h"\n#include "trainer/comm/comm.h"\n' > "$work/ok/trainer/model/m.cpp"
mkdir -p "$work/ok/trainer/step" "$work/ok/trainer/run"
printf '#include "trainer/optim/optimizer.h"\n#include "trainer/model/model.h"\n' > "$work/ok/trainer/step/s.cpp"
printf '#include "trainer/step/step_runner.h"\n' > "$work/ok/trainer/run/r.cpp"
printf '#include "base/check.h"\n#include "kernels/cuda/runtime.h"\n' > "$work/ok/kernels/k.cpp"
mkdir -p "$work/ok/base"
printf '#include "base/file_read.h"\n#include "base/check.h"\n' > "$work/ok/base/file_read.cpp"
mkdir -p "$work/ok/kernels/bench" "$work/ok/tests/ladder"
printf '#include "kernels/cuda/ladder/attention_versions.h"\n' > "$work/ok/kernels/bench/attention_bench.cu"
printf '#include "kernels/cuda/ladder/attention_versions.h"\n' > "$work/ok/tests/ladder/t.cpp"
mkdir -p "$work/ok/harness/report" "$work/ok/harness/record" "$work/ok/harness/apps"
printf '#include "harness/nightly/night.h"\n#include "harness/render/svg.h"\n#include "harness/launcher/atomic_file.h"\n' \
  > "$work/ok/harness/report/r.cpp"
printf '#include "harness/launcher/process.h"\n#include "harness/logparse/logparse.h"\n' > "$work/ok/harness/record/h.cpp"
printf '#include "harness/commands/common.h"\n#include "harness/store/store.h"\n' > "$work/ok/harness/apps/main.cpp"
"$check" "$work/ok" >/dev/null 2>&1 || fail "allowed includes were refused"

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "check_includes_test: ok"
