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
ALL_PAIRS=(overhead matmul add conv random mlp lenet lenet_bn)
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

# The epoch workloads are the tutorial programs themselves (--result-line); the
# others are bench/<pair>.c. Binaries are taken from the opt output folder, not the
# bazel-bin symlink (which follows whatever configuration was built last).
declare -A TARGET=([mlp]=//tutorials/02_mlp [lenet]=//tutorials/03_lenet [lenet_bn]=//tutorials/04_batchnorm_gpu)
declare -A OUTPUTS=([mlp]="--plot @/loss.svg --checkpoint @/ckpt.safetensors" [lenet]="--plot @/loss.svg" [lenet_bn]="")
# The epoch pairs start from the same weights: the same seed already gives both the
# same weights (tapegrad draws PyTorch's numbers); the tutorial also saves its initial
# weights (--save-init) and the twin loads them (--init), a guard against drift.
targets=()
for pair in "${PAIRS[@]}"; do targets+=("${TARGET[$pair]:-//bench:$pair}"); done
./bazelw build -c opt "${targets[@]}" >/dev/null
bin=$(./bazelw info -c opt bazel-bin 2>/dev/null)
scratch=$(mktemp -d)
results=$scratch/results
trap 'rm -rf "$scratch"' EXIT
command_for() {
  local t=${TARGET[$1]:-}
  if [[ -n $t ]]; then
    local path=${t#//}
    echo "$bin/$path/$(basename "$path") --result-line ${OUTPUTS[$1]//@/$scratch} --save-init $scratch/init_$1.safetensors"
  else
    echo "$bin/bench/$1"
  fi
}
for round in $(seq "$ROUNDS"); do
  for pair in "${PAIRS[@]}"; do
    echo "round $round: $pair" >&2
    $(command_for "$pair") | grep '^RESULT ' >>"$results" || echo "$pair (tapegrad) failed" >&2
    twin_args=()
    [[ -n ${TARGET[$pair]:-} ]] && twin_args=(--init "$scratch/init_$pair.safetensors")
    /usr/bin/python3 "bench/${pair}_torch.py" "${twin_args[@]}" | grep '^RESULT ' >>"$results" || echo "bench/${pair}_torch.py failed" >&2
  done
done
/usr/bin/python3 bench/report.py "$results" docs/perf.md
