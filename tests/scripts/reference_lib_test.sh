#!/usr/bin/env bash
# scripts/reference_lib's standard-library parts: the side-by-side verdict and the batch index reader.
set -euo pipefail
root=${1:?usage: reference_lib_test.sh SOURCE_DIR}
PYTHONDONTWRITEBYTECODE=1 python3 "$root/tests/scripts/reference_lib_cases.py" "$root" -v
