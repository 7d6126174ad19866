#!/usr/bin/env bash
# //:code_shape_test: no macro over 30 lines, no function of 100 lines or more in the
# library (tools/check_code_shape.py).
set -euo pipefail
# Under bazel test the working directory is the workspace's runfiles; else the repo.
[[ -n ${TEST_SRCDIR:-} ]] || cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec python3 tools/check_code_shape.py "$@"
