#!/bin/sh
echo "tapegrad: 'bazel coverage' is not set up (offline stand-in for @remote_coverage_tools)" >&2
exit 1
