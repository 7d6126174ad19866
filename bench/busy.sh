#!/usr/bin/env bash
# Runs commands alternately, each while N CPU-bound background processes share the
# machine, and prints the median time of each as a Markdown table row.
#   bench/busy.sh [--busy N] [--rounds R] NAME=COMMAND [NAME=COMMAND ...]
#   bench/busy.sh --busy 2 --rounds 3 \
#     "before=/tmp/before/02_mlp --max-steps 200 --result-line" \
#     "after=bazel-out/k8-opt-cpu_only/bin/tutorials/02_mlp/02_mlp --max-steps 200 --result-line"
# A command's time is the "seconds" of its first `RESULT {json}` line (the tutorials'
# --result-line: the training loop only), else its wall time. The N background processes
# (`while :; do :; done` in sh) start before each run and are killed right after it, so
# every command sees the same load; --busy 0 (the default) measures the machine as it is.
# A command may set environment variables first: "passive=env OMP_WAIT_POLICY=passive prog".
set -euo pipefail
busy=0
rounds=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --busy) busy=$2; shift 2 ;;
    --busy=*) busy=${1#*=}; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    --rounds=*) rounds=${1#*=}; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || { echo "usage: bench/busy.sh [--busy N] [--rounds R] NAME=COMMAND ..." >&2; exit 2; }

source "$(dirname "$0")/load.sh"
trap stop_load EXIT

names=()
declare -A cmds times
for spec in "$@"; do
  name=${spec%%=*}
  names+=("$name")
  cmds[$name]=${spec#*=}
  times[$name]=""
done

for ((r = 1; r <= rounds; r++)); do
  for name in "${names[@]}"; do
    start_load "$busy"
    t0=$(date +%s.%N)
    out=$(bash -c "${cmds[$name]}" 2>&1) || echo "busy.sh: $name exited with an error" >&2
    t1=$(date +%s.%N)
    stop_load
    secs=$(grep -m1 '^RESULT ' <<<"$out" | sed -n 's/.*"seconds": *\([0-9.eE+-]*\).*/\1/p' || true)
    [[ -n $secs ]] || secs=$(echo "$t1 - $t0" | bc -l)
    printf 'round %d  busy %d  %-12s %8.3f s\n' "$r" "$busy" "$name" "$secs" >&2
    times[$name]="${times[$name]} $secs"
  done
done

echo "| command | busy processes | runs (s) | median (s) |"
echo "|---|---|---|---|"
for name in "${names[@]}"; do
  median=$(tr ' ' '\n' <<<"${times[$name]}" | grep -v '^$' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  runs=$(tr ' ' '\n' <<<"${times[$name]}" | grep -v '^$' | xargs printf '%.2f, ' | sed 's/, $//')
  printf '| %s | %d | %s | %.2f |\n' "$name" "$busy" "$runs" "$median"
done
