#!/usr/bin/env bash
# //:trace_macros_test: core/trace_macros.h matches the public headers
# (regenerate with tools/gen_trace_macros.py).
set -euo pipefail
# Under bazel test the working directory is the workspace's runfiles; else the repo.
[[ -n ${TEST_SRCDIR:-} ]] || cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec python3 tools/gen_trace_macros.py --check
