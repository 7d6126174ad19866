#!/usr/bin/env bash
# //:public_headers_test: tapegrad.h shows the public API only, no internal name
# (tools/check_public_headers.py).
set -euo pipefail
# Under bazel test the working directory is the workspace's runfiles; else the repo.
[[ -n ${TEST_SRCDIR:-} ]] || cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec python3 tools/check_public_headers.py "$@"
