#!/usr/bin/env bash
# Data-parallel LeNet (tutorials/11_ddp) on 1 rank of batch 64 vs 2 ranks of batch 32
# (the same samples per step), one thread per rank, on this machine; prints a
# Markdown table: time per step, the projected Fashion-MNIST epoch (938 steps of 64),
# and DDP's all-reduce time per step with the part hidden behind backward.
#   bench/ddp.sh [--steps N]     (default 150 steps per run; the first 5% is warm-up
#                                 included, so take the figures as a lower bound)
# Measured figures go in docs/distributed.md with their date and machine load.
set -euo pipefail
steps=150
while [[ $# -gt 0 ]]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --steps=*) steps=${1#*=}; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "${BASH_SOURCE[0]}")/.."
./bazelw build --config=cpu_only //tutorials/11_ddp >&2  # the library is -O3 in every mode
binary=$(./bazelw info --config=cpu_only bazel-bin 2>/dev/null)/tutorials/11_ddp/11_ddp
export TG_NUM_THREADS=1

run() { # RANKS BATCH -> "seconds_per_step comm_ms wait_ms hidden_pct"
  local out
  out=$(tests/distributed/run_mpi.sh "$1" "$binary" --device cpu --epochs 1 --batch-size "$2" --max-steps "$steps" 2>&1) ||
    { echo "$out" >&2; exit 1; }
  local seconds comm wait hidden
  seconds=$(sed -nE 's/^epoch 1: .*, ([0-9.]+) s$/\1/p' <<<"$out")
  read -r comm wait hidden < <(sed -nE 's/^all-reduce: .* ([0-9.]+) ms per step, of which ([0-9.]+) ms waited .*\(([0-9]+)% hidden.*$/\1 \2 \3/p' <<<"$out") || true
  echo "$(awk -v s="$seconds" -v n="$steps" 'BEGIN { printf "%.5f", s / n }') ${comm:--} ${wait:--} ${hidden:--}"
}

echo "| ranks | batch per rank | ms per step | epoch (938 steps of 64) | all-reduce ms per step | waited after backward | hidden |"
echo "|---|---|---|---|---|---|---|"
for config in "1 64" "2 32"; do
  read -r ranks batch <<<"$config"
  read -r per_step comm wait hidden < <(run "$ranks" "$batch")
  awk -v r="$ranks" -v b="$batch" -v p="$per_step" -v c="$comm" -v w="$wait" -v h="$hidden" 'BEGIN {
    if (r == 1) { c = "-"; w = "-"; h = "-" } else { h = h "%" }
    printf "| %d | %d | %.1f | %.0f s | %s | %s | %s |\n", r, b, 1000 * p, 938 * p, c, w, h }'
done
