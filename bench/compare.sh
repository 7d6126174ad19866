#!/usr/bin/env bash
# Runs every benchmark next to its PyTorch twin on this machine, alternately, and
# writes the table into docs/perf.md (between the BEGIN/END markers).
#   bench/compare.sh                 all pairs, 3 rounds
#   bench/compare.sh overhead matmul only these pairs
#   ROUNDS=5 bench/compare.sh
# Each program prints "RESULT {json}" lines; the median over rounds is reported.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
ALL_PAIRS=(overhead matmul add conv mlp lenet lenet_bn)
PAIRS=("$@")
[[ ${#PAIRS[@]} -gt 0 ]] || PAIRS=("${ALL_PAIRS[@]}")

# The twins need Debian's PyTorch with OpenBLAS behind libblas.so.3 (else PyTorch
# runs the reference BLAS at ~5 GFLOP/s and the comparison means nothing).
need=()
for p in python3-torch libopenblas0-pthread; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
if [[ ${#need[@]} -gt 0 ]]; then
  if [[ $(id -u) == 0 ]]; then apt-get install -y "${need[@]}"; else sudo apt-get install -y "${need[@]}"; fi
fi

./bazelw build -c opt $(printf -- '//bench:%s ' "${PAIRS[@]}") >/dev/null
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for round in $(seq "$ROUNDS"); do
  for pair in "${PAIRS[@]}"; do
    echo "round $round: $pair" >&2
    "bazel-bin/bench/$pair" | grep '^RESULT ' >>"$results" || echo "bench/$pair failed" >&2
    /usr/bin/python3 "bench/${pair}_torch.py" | grep '^RESULT ' >>"$results" || echo "bench/${pair}_torch.py failed" >&2
  done
done
/usr/bin/python3 bench/report.py "$results" docs/perf.md
