#!/usr/bin/env bash
# Makes the virtual environment of the strongest CPU peers, from PyPI: PyTorch 2
# (eager and torch.compile), JAX with optax, and ONNX Runtime (bench/onnx_runtime.py
# runs tapegrad's ONNX exports in it). Benchmarks only: no test and no CI stage needs
# it. Prints the environment's python.
#   bench/peers/setup.sh            # into $TG_PEERS_VENV (default ~/.cache/tapegrad-peers)
# The versions are pinned so that a table names what it measured; PyPI's torch wheel
# carries CUDA libraries (a few GB) that stay unused here.
set -euo pipefail
venv=${TG_PEERS_VENV:-$HOME/.cache/tapegrad-peers}
TORCH_VERSION=2.15.0
JAX_VERSION=0.10.2
ORT_VERSION=1.32.0
if [[ ! -x $venv/bin/python ]] ||
   ! "$venv/bin/python" -c "import torch, jax, optax, onnxruntime; assert torch.__version__.startswith('$TORCH_VERSION') and jax.__version__ == '$JAX_VERSION' and onnxruntime.__version__ == '$ORT_VERSION'" 2>/dev/null; then
  echo "peers: installing torch $TORCH_VERSION, jax $JAX_VERSION, optax and onnxruntime $ORT_VERSION into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "torch==$TORCH_VERSION" "jax==$JAX_VERSION" optax "onnxruntime==$ORT_VERSION" numpy >&2
fi
echo "$venv/bin/python"
