#!/usr/bin/env bash
# How one epoch of tutorials/02_mlp depends on the seed, in tapegrad and in its
# PyTorch twin, seed by seed. The same seed gives both the same initial weights and
# the same data order (tapegrad draws PyTorch's numbers), so each row compares one
# training run in two frameworks. Not a benchmark: prints test accuracies.
#   bench/mlp_seeds.sh 1 2 3 4 5 6 7 8
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=("$@")
[[ ${#seeds[@]} -gt 0 ]] || seeds=(1)
./bazelw build -c opt //tutorials/02_mlp >/dev/null
bin=$(./bazelw info -c opt bazel-bin 2>/dev/null)/tutorials/02_mlp/02_mlp
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
accuracy() { sed -n 's/^RESULT .*"check": \([0-9.]*\).*/\1/p'; }
echo "| seed | tapegrad | PyTorch |"
echo "|---|---|---|"
for s in "${seeds[@]}"; do
  tg=$(cd "$scratch" && "$bin" --seed "$s" --result-line --plot "$scratch/loss.svg" --checkpoint "$scratch/ck.safetensors" | accuracy)
  pt=$(/usr/bin/python3 bench/mlp_torch.py --seed "$s" | accuracy)
  echo "| $s | $tg | $pt |"
done
