#!/usr/bin/env bash
# //:format_test: every tracked C, C++ and CUDA source follows .clang-format (Debian 12's
# clang-format 14, which ./bazelw installs; another major version formats differently,
# so it is refused rather than compared). Reformat: tools/check_format.sh --fix
set -euo pipefail
[[ -n ${TEST_SRCDIR:-} ]] || cd "$(dirname "${BASH_SOURCE[0]}")/.."
cf=$(command -v clang-format-14 || command -v clang-format || true)
[[ -n $cf ]] || { echo "format: no clang-format (Debian: apt-get install clang-format)" >&2; exit 1; }
"$cf" --version | grep -q "version 14\." || { echo "format: $cf is not clang-format 14: $("$cf" --version)" >&2; exit 1; }
mapfile -t files < <(find core autograd ops nn quant optim data io distributed onnx tests tutorials bench tools \
  -type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -not -path '*/fixtures/*' | sort)
[[ -f tapegrad.h ]] && files+=(tapegrad.h)
if [[ ${1:-} == --fix ]]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
if ! "$cf" --dry-run --Werror "${files[@]}" 2>/tmp/format_test.$$; then
  grep -o '^[^:]*:[0-9]*' /tmp/format_test.$$ | sort -u | head -40 >&2
  echo "format: the files above do not follow .clang-format; run tools/check_format.sh --fix" >&2
  rm -f /tmp/format_test.$$
  exit 1
fi
rm -f /tmp/format_test.$$
echo "format: ${#files[@]} files follow .clang-format"
