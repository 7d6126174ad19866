#!/usr/bin/env bash
# A change's cost: the per-op overhead (bench/overhead.c) and the MLP and LeNet epochs
# (tutorials 02 and 03, --result-line) built at two commits and run alternately on this
# machine, reported as after/before ratios of medians (a refactor should give ~1.00).
#   bench/before_after.sh BEFORE [AFTER]      AFTER defaults to the working tree's HEAD
#   ROUNDS=5 MAX_STEPS=300 bench/before_after.sh d7445f0
# Each commit is built in a git worktree under $TMPDIR (-c opt --config=cpu_only).
set -euo pipefail
cd "$(dirname "$0")/.."
before=${1:?usage: bench/before_after.sh BEFORE [AFTER]}
after=${2:-HEAD}
ROUNDS=${ROUNDS:-5}
MAX_STEPS=${MAX_STEPS:-300}
root=$(pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/before_after.XXXXXX")
trap 'cd "$root"; for c in before after; do git worktree remove --force "$scratch/$c" 2>/dev/null || true; done; rm -rf "$scratch"' EXIT

build() { # $1: label, $2: commit
  git worktree add --detach -q "$scratch/$1" "$2"
  (cd "$scratch/$1" && ./bazelw build -c opt --config=cpu_only //bench:overhead //tutorials/02_mlp //tutorials/03_lenet \
     >/dev/null 2>&1 && bin=$(./bazelw info -c opt --config=cpu_only bazel-bin 2>/dev/null) &&
   mkdir -p "$scratch/bin_$1" &&
   cp "$bin/bench/overhead" "$bin/tutorials/02_mlp/02_mlp" "$bin/tutorials/03_lenet/03_lenet" "$scratch/bin_$1/" &&
   ./bazelw shutdown >/dev/null 2>&1)
}
echo "building $before and $after (cpu_only, -c opt)" >&2
build before "$before"
build after "$after"

# One number per program: the overhead bench's microseconds per op, a run's seconds.
run() { # $1: label, $2: program
  local b=$scratch/bin_$1
  case $2 in
    overhead) "$b/overhead" | grep '^RESULT ' | tail -1 | sed 's/.*"unit_value": *\([0-9.e+-]*\).*/\1/' ;;
    mlp) "$b/02_mlp" --result-line --max-steps "$MAX_STEPS" --plot "$scratch/p.svg" | grep '^RESULT ' | tail -1 |
         sed 's/.*"seconds": *\([0-9.e+-]*\).*/\1/' ;;
    lenet) "$b/03_lenet" --result-line --max-steps "$MAX_STEPS" --plot "$scratch/p.svg" | grep '^RESULT ' | tail -1 |
           sed 's/.*"seconds": *\([0-9.e+-]*\).*/\1/' ;;
  esac
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
printf '%-10s %12s %12s %8s\n' program before after ratio
for prog in overhead mlp lenet; do
  : >"$scratch/before.txt"
  : >"$scratch/after.txt"
  for _ in $(seq "$ROUNDS"); do # alternating, so a busy spell hits both
    run before "$prog" >>"$scratch/before.txt"
    run after "$prog" >>"$scratch/after.txt"
  done
  b=$(median <"$scratch/before.txt") a=$(median <"$scratch/after.txt")
  printf '%-10s %12s %12s %8.3f\n' "$prog" "$b" "$a" "$(echo "$a / $b" | bc -l)"
done
