#!/usr/bin/env bash
# Runs every benchmark next to its PyTorch twin on this machine, alternately, and
# writes the table into docs/perf.md (between the BEGIN/END markers).
#   bench/compare.sh                 all pairs, 3 rounds, against Debian's PyTorch 1.13
#   bench/compare.sh overhead matmul only these pairs
#   ROUNDS=5 bench/compare.sh
#   bench/compare.sh --peers         also PyTorch 2 (eager; compiled for the epochs) and
#                                    JAX (bench/peers/, installed by bench/peers/setup.sh)
#   bench/compare.sh --peers --busy 2  N CPU-bound processes run during every measurement
#   bench/compare.sh mlp mlp_amp     float32 and bfloat16-autocast epochs (--amp bf16; the
#                                    twins with torch.autocast("cpu", torch.bfloat16))
#   MAX_STEPS=20 ROUNDS=1 bench/compare.sh mlp_amp   smoke run: the epoch pairs stop after
#                                    N steps; the table is printed, docs/perf.md left alone
#   bench/compare.sh --flush-denormal  the epochs with subnormals flushed to zero: the
#                                    tutorials' --flush-denormal, torch.set_flush_denormal in
#                                    the PyTorch twins; JAX flushes in every run (its own table)
#   bench/compare.sh --peers resnet gpt  issues 32 and 33: the ResNet-20 step and lesson 10's
#                                    GPT (300 steps, or MAX_STEPS; by name only: a round of it
#                                    takes 15 minutes or more on 2 cores). Named pairs write a
#                                    table of their own in docs/perf.md (its marker names them)
#   NO_TORCH113=1 bench/compare.sh --peers --busy 2 gpt   without Debian's PyTorch 1.13 (a busy
#                                    machine starves its OpenMP threads: 6% of a core)
# Each program prints "RESULT {json}" lines; the median over rounds is reported.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
peers=0 busy=0 flush=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --peers) peers=1; shift ;;
    --busy) busy=$2; shift 2 ;;
    --busy=*) busy=${1#*=}; shift ;;
    --flush-denormal) flush=1; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
ALL_PAIRS=(overhead matmul add conv random resnet mlp lenet lenet_bn mlp_amp lenet_bn_amp qmlp qlenet)
[[ $peers == 0 ]] || ALL_PAIRS=(overhead matmul conv resnet mlp lenet lenet_bn mlp_amp lenet_bn_amp)
# The JAX twin of a pair when not bench/peers/jax_epoch.py PAIR (epochs) or
# bench/peers/jax_micro.py PAIR (the others). resnet_torch.py times torch.compile itself
# under PyTorch 2: a second RESULT line.
declare -A JAX_TWIN=([resnet]=bench/peers/jax_resnet.py [gpt]=bench/peers/jax_gpt.py)
MAX_STEPS=${MAX_STEPS:-}
PAIRS=("$@")
NAMED=("$@") # pairs named on the command line write their own table (below)
[[ ${#PAIRS[@]} -gt 0 ]] || PAIRS=("${ALL_PAIRS[@]}")
source bench/load.sh
trap stop_load EXIT
peer_python=""
if [[ $peers == 1 ]]; then
  peer_python=$(bench/peers/setup.sh)
fi

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
declare -A TARGET=([mlp]=//tutorials/02_mlp [lenet]=//tutorials/03_lenet [lenet_bn]=//tutorials/04_batchnorm_gpu
                   [mlp_amp]=//tutorials/02_mlp [lenet_bn_amp]=//tutorials/04_batchnorm_gpu
                   [gpt]=//tutorials/10_gpt)
declare -A OUTPUTS=([mlp]="--plot @/loss.svg --checkpoint @/ckpt.safetensors" [lenet]="--plot @/loss.svg" [lenet_bn]=""
                    [mlp_amp]="--amp bf16 --plot @/loss.svg --checkpoint @/ckpt.safetensors"
                    [lenet_bn_amp]="--amp bf16" [gpt]="--sample-tokens 0")
# Pairs that train a fixed number of steps unless MAX_STEPS: the GPT's cosine schedule
# spans its run (300: the lesson's README run); its RESULT is seconds per step.
declare -A STEPS=([gpt]=300)
# The twin of a pair: bench/<pair>_torch.py unless named here (the autocast pairs are
# the float32 twins with --amp).
declare -A TWIN=([mlp_amp]="bench/mlp_torch.py --amp" [lenet_bn_amp]="bench/lenet_bn_torch.py --amp")
steps_for() {
  local steps=${MAX_STEPS:-${STEPS[$1]:-}}
  echo "${steps:+--max-steps $steps}$([[ $flush == 0 ]] || echo " --flush-denormal")"
}
# The epoch pairs start from the same weights: the same seed already gives both the
# same weights (tapegrad draws PyTorch's numbers); the tutorial also saves its initial
# weights (--save-init) and the twin loads them (--init), a guard against drift.
targets=()
for pair in "${PAIRS[@]}"; do targets+=("${TARGET[$pair]:-//bench:$pair}"); done
# Without a visible GPU the programs are built CPU-only: the same CPU code, without the
# nvcc half of the build (minutes).
build=(-c opt)
nvidia-smi -L >/dev/null 2>&1 || build+=(--config=cpu_only)
./bazelw build "${build[@]}" "${targets[@]}" >/dev/null
bin=$(./bazelw info "${build[@]}" bazel-bin 2>/dev/null)
scratch=$(mktemp -d)
results=$scratch/results
trap 'stop_load; rm -rf "$scratch"' EXIT
command_for() {
  local t=${TARGET[$1]:-}
  if [[ -n $t ]]; then
    local path=${t#//}
    echo "$bin/$path/$(basename "$path") --result-line ${OUTPUTS[$1]//@/$scratch} --save-init $scratch/init_$1.safetensors $(steps_for "$1")"
  else
    echo "$bin/bench/$1"
  fi
}
# One measured program, under the chosen load; its RESULT lines go to $results.
measure() {
  local name=$1
  shift
  echo "  $name" >&2
  start_load "$busy"
  # Each RESULT to the results and its time to the log, so a median's rounds can be read.
  "$@" | grep '^RESULT ' | tee -a "$results" | sed 's/.*"bench": "\([^"]*\)".*"seconds": \([^,]*\),.*/    \1: \2 s/' >&2 ||
    echo "$name failed" >&2
  stop_load
}
for round in $(seq "$ROUNDS"); do
  for pair in "${PAIRS[@]}"; do
    echo "round $round: $pair" >&2
    # shellcheck disable=SC2046
    measure tapegrad $(command_for "$pair")
    twin_args=()
    # shellcheck disable=SC2207
    [[ -n ${TARGET[$pair]:-} ]] && twin_args=(--init "$scratch/init_$pair.safetensors" $(steps_for "$pair"))
    # shellcheck disable=SC2206
    twin=(${TWIN[$pair]:-bench/${pair}_torch.py})
    [[ ${NO_TORCH113:-0} == 1 ]] || measure "PyTorch 1.13" /usr/bin/python3 "${twin[@]}" "${twin_args[@]}"
    [[ $peers == 1 ]] || continue
    measure "PyTorch 2" "$peer_python" "${twin[@]}" "${twin_args[@]}"
    if [[ -n ${TWIN[$pair]:-} ]]; then
      : # autocast pairs: no torch.compile or JAX twin
    elif [[ -n ${TARGET[$pair]:-} ]]; then
      measure "PyTorch 2 compile" "$peer_python" "bench/${pair}_torch.py" --compile "${twin_args[@]}"
      # shellcheck disable=SC2206
      jax=(${JAX_TWIN[$pair]:-bench/peers/jax_epoch.py $pair})
      measure JAX "$peer_python" "${jax[@]}" "${twin_args[@]}"
    else
      # shellcheck disable=SC2206
      jax=(${JAX_TWIN[$pair]:-bench/peers/jax_micro.py $pair})
      measure JAX "$peer_python" "${jax[@]}"
    fi
  done
done
marker="bench/compare.sh"
if [[ $peers == 1 ]]; then
  marker="bench/compare.sh --peers --busy $busy"
  TG_BENCH_VERSIONS="Debian's PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), $("$peer_python" -c 'import torch, jax; print(f"PyTorch {torch.__version__}, JAX {jax.__version__}")') from PyPI"
  export TG_BENCH_VERSIONS
fi
if [[ $busy -gt 0 ]]; then
  export TG_BENCH_LOAD="Busy: $busy CPU-bound processes ran beside every measured program."
fi
if [[ $flush == 1 ]]; then
  marker+=" --flush-denormal"
  TG_BENCH_LOAD="${TG_BENCH_LOAD:+$TG_BENCH_LOAD }Subnormals flushed to zero in every program (tapegrad's and PyTorch's option; JAX always)."
  export TG_BENCH_LOAD
fi
# A run of named pairs gets a table of its own ("... --busy 0 resnet gpt"), so that it does
# not replace the full run's table, whose rows it would drop.
[[ ${#NAMED[@]} -eq 0 ]] || marker+=" ${NAMED[*]}"
if [[ -n $MAX_STEPS ]]; then # a smoke run: the table goes to a scratch copy, printed
  cp docs/perf.md "$scratch/perf.md"
  /usr/bin/python3 bench/report.py "$results" "$scratch/perf.md" "$marker"
  exit 0
fi
/usr/bin/python3 bench/report.py "$results" docs/perf.md "$marker"
