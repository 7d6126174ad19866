"""JAX twins of the tutorials' epochs: 02_mlp (Adam), 03_lenet and 04_batchnorm_gpu on
the CPU (SGD momentum 0.9), one epoch of Fashion-MNIST at batch 64, written as a JAX
user would: one `jax.jit` train step (forward, `jax.value_and_grad`, optax update)
with its buffers donated. Same data, normalisation, data order and initial weights as
tapegrad and the PyTorch twins (bench/mlp_torch.py has the shared pieces; the weights
are PyTorch's for the seed, or the tutorial's --save-init file). The step is compiled
ahead of time for both batch shapes (64 and the last batch's 32), so the epoch time is
the compiled program's, not the compiler's. Prints a RESULT line with "impl": "jax".

    $(bench/peers/setup.sh) bench/peers/jax_epoch.py mlp|lenet|lenet_bn [--init FILE] [--max-steps N]
"""
import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import torch  # noqa: E402  (the data order and the initial weights only)

from lenet_bn_torch import make_lenet_bn  # noqa: E402
from lenet_torch import make_lenet  # noqa: E402
from mlp_torch import FASHION_DIR, check_order, load_fashion, load_safetensors, loader_orders, make_mlp  # noqa: E402

BN_EPS, BN_MOMENTUM = 1e-5, 0.1


def linear(p, name, x):
    return x @ p[name + ".weight"].T + p[name + ".bias"]


def conv(p, name, x):
    y = jax.lax.conv_general_dilated(x, p[name + ".weight"], (1, 1), "VALID",
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return y + p[name + ".bias"][None, :, None, None]


def max_pool2(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def batch_norm(p, s, name, x, train):
    """BatchNorm2d as PyTorch's: batch statistics in training (running variance
    updated with the unbiased one), running statistics in evaluation."""
    w, b = p[name + ".weight"][None, :, None, None], p[name + ".bias"][None, :, None, None]
    if not train:
        mean, var = s[name + ".running_mean"], s[name + ".running_var"]
        return (x - mean[None, :, None, None]) / jnp.sqrt(var[None, :, None, None] + BN_EPS) * w + b, s
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    n = x.size // x.shape[1]
    s = dict(s)
    s[name + ".running_mean"] = (1 - BN_MOMENTUM) * s[name + ".running_mean"] + BN_MOMENTUM * mean
    s[name + ".running_var"] = (1 - BN_MOMENTUM) * s[name + ".running_var"] + BN_MOMENTUM * var * n / (n - 1)
    return (x - mean[None, :, None, None]) / jnp.sqrt(var[None, :, None, None] + BN_EPS) * w + b, s


def mlp(p, s, x, train):
    for i in (0, 2, 4, 6):
        x = jax.nn.relu(linear(p, str(i), x))
    return linear(p, "8", x), s


def lenet(p, s, x, train):
    x = max_pool2(jax.nn.relu(conv(p, "0", x)))
    x = max_pool2(jax.nn.relu(conv(p, "3", x)))
    x = jax.nn.relu(linear(p, "7", x.reshape(x.shape[0], -1)))
    return linear(p, "9", x), s


def lenet_bn(p, s, x, train):
    x, s = batch_norm(p, s, "1", conv(p, "0", x), train)
    x = max_pool2(jax.nn.relu(x))
    x, s = batch_norm(p, s, "5", conv(p, "4", x), train)
    x = max_pool2(jax.nn.relu(x))
    x = jax.nn.relu(linear(p, "9", x.reshape(x.shape[0], -1)))
    return linear(p, "11", x), s


MODELS = {  # name: (bench, forward, torch model for the initial weights, optimizer, image shape)
    "mlp": ("mlp_epoch", mlp, make_mlp, lambda: optax.adam(1e-3), False),
    "lenet": ("lenet_epoch", lenet, make_lenet, lambda: optax.sgd(0.01, momentum=0.9), True),
    "lenet_bn": ("lenet_bn_epoch", lenet_bn, make_lenet_bn, lambda: optax.sgd(0.01, momentum=0.9), True),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--data", default=FASHION_DIR)
    ap.add_argument("--init", help="start from these weights (a tutorial's --save-init file)")
    ap.add_argument("--cost", action="store_true", help="print XLA's cost analysis of the train step and stop")
    ap.add_argument("--flush-denormal", action="store_true",
                    help="accepted for bench/compare.sh: XLA's CPU client flushes subnormals to zero in every run")
    args = ap.parse_args()
    bench, forward, make_torch_model, make_opt, image_shape = MODELS[args.model]

    train_x, train_y, test_x, test_y = (t.numpy() for t in load_fashion(args.data, image_shape))
    torch.manual_seed(args.seed)
    weights = make_torch_model().state_dict()
    if args.init:
        weights = load_safetensors(args.init)
    buffers = {k for k in weights if ".running_" in k or "num_batches" in k}
    params = {k: jnp.asarray(v.numpy()) for k, v in weights.items() if k not in buffers}
    state = {k: jnp.asarray(v.numpy()) for k, v in weights.items() if ".running_" in k}
    tx = make_opt()
    opt_state = tx.init(params)

    def step(params, state, opt_state, xb, yb):
        def loss_fn(p):
            logits, new_state = forward(p, state, xb, True)
            return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean(), new_state
        (loss, state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), state, opt_state, loss

    perm = next(loader_orders(len(train_x), args.seed))
    check_order(perm, args.seed, len(train_x))
    order = np.asarray(perm)
    n, bs = len(order), args.batch_size
    jitted = jax.jit(step, donate_argnums=(0, 1, 2))
    compiled = {}
    for size in {bs, n % bs or bs}:  # ahead of time, before the clock
        compiled[size] = jitted.lower(params, state, opt_state, train_x[:size], train_y[:size]).compile()
    if args.cost:  # what XLA counts for one step of batch 64: the machine's lower bound
        cost = compiled[bs].cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        print(f"COST {args.model}: {cost.get('flops', 0) / 1e6:.1f} MFLOP, "
              f"{cost.get('bytes accessed', 0) / 1e6:.1f} MB accessed per step")
        return
    evaluate_batch = jax.jit(lambda p, s, x: jnp.argmax(forward(p, s, x, False)[0], 1))

    losses, steps = [], 0
    start = time.perf_counter()
    for begin in range(0, n, bs):
        if args.max_steps and steps >= args.max_steps:
            break
        idx = order[begin:begin + bs]
        params, state, opt_state, loss = compiled[len(idx)](params, state, opt_state, train_x[idx], train_y[idx])
        losses.append(loss)
        steps += 1
    jax.block_until_ready(params)
    seconds = time.perf_counter() - start

    correct = sum(int((np.asarray(evaluate_batch(params, state, test_x[b:b + 1000])) == test_y[b:b + 1000]).sum())
                  for b in range(0, len(test_x), 1000))
    accuracy = 100.0 * correct / len(test_x)
    mean_loss = float(jnp.mean(jnp.stack(losses)))
    print(f"epoch 1: train loss {mean_loss:.4f}, test accuracy {accuracy:.2f}%, {steps} steps, {seconds:.1f} s")
    print("RESULT " + json.dumps({"bench": bench, "impl": "jax", "seconds": round(seconds, 3),
                                  "unit_value": round(seconds, 3), "unit": "s", "check": round(accuracy, 2),
                                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}),
          flush=True)


if __name__ == "__main__":
    main()
