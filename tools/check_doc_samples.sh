#!/usr/bin/env bash
# //:doc_samples_test: the C samples of README.md and docs/*.md compile and link
# (tools/check_doc_samples.py). Args: --lib <libtapegrad.a>.
set -euo pipefail
# Under bazel test the working directory is the workspace's runfiles; else the repo.
[[ -n ${TEST_SRCDIR:-} ]] || cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec python3 tools/check_doc_samples.py "$@"
