"""JAX twin of bench/resnet.c and bench/resnet_torch.py: one ResNet-20 training step at
batch 128 on CIFAR-shaped data, written as a JAX user would: one `jax.jit` train step
with its buffers donated (forward with lax.conv_general_dilated, batch norm in training
mode with the running statistics updated, ReLU, global average pool, Linear; cross
entropy; `jax.value_and_grad`; optax SGD lr 0.1, Nesterov momentum 0.9, weight decay
5e-4 added to the gradient as PyTorch's SGD does). The weights and data are
resnet_torch.py's (PyTorch's model and draws under the same seed, as numpy), so
"check" (the first step's loss) agrees with the PyTorch twin's and tapegrad's. The
median of REPS steps after WARMUP; the compilation happens in the first warm-up step,
which is not timed. Prints a RESULT line with "impl": "jax".

    $(bench/peers/setup.sh) bench/peers/jax_resnet.py
"""
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
import torch  # noqa: E402  (the initial weights and the data only)

from resnet_torch import BATCH, REPS, WARMUP, resnet20  # noqa: E402

BN_EPS, BN_MOMENTUM = 1e-5, 0.1
WIDTHS, BLOCKS = (16, 32, 64), (3, 3, 3)


def conv(p, name, x, stride):
    w = p[name + ".weight"]
    pad = (w.shape[2] - 1) // 2
    return jax.lax.conv_general_dilated(x, w, (stride, stride), ((pad, pad), (pad, pad)),
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))


def batch_norm(p, s, name, x):
    """BatchNorm2d in training mode: batch statistics; the running mean and the
    (unbiased) running variance updated as PyTorch does."""
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    n = x.size // x.shape[1]
    s[name + ".running_mean"] = (1 - BN_MOMENTUM) * s[name + ".running_mean"] + BN_MOMENTUM * mean
    s[name + ".running_var"] = (1 - BN_MOMENTUM) * s[name + ".running_var"] + BN_MOMENTUM * var * n / (n - 1)
    scale = p[name + ".weight"] * jax.lax.rsqrt(var + BN_EPS)
    return (x - mean[None, :, None, None]) * scale[None, :, None, None] + p[name + ".bias"][None, :, None, None]


def block(p, s, name, x, stride):
    out = jax.nn.relu(batch_norm(p, s, name + ".bn1", conv(p, name + ".conv1", x, stride)))
    out = batch_norm(p, s, name + ".bn2", conv(p, name + ".conv2", out, 1))
    if name + ".downsample.0.weight" in p:  # option B: 1x1 conv + BN
        x = batch_norm(p, s, name + ".downsample.1", conv(p, name + ".downsample.0", x, stride))
    return jax.nn.relu(out + x)


def resnet(p, s, x):
    s = dict(s)
    x = jax.nn.relu(batch_norm(p, s, "bn1", conv(p, "conv1", x, 1)))
    for i, count in enumerate(BLOCKS):
        for j in range(count):
            x = block(p, s, f"layer{i + 1}.{j}", x, 2 if i and j == 0 else 1)
    x = x.mean((2, 3))
    return x @ p["fc.weight"].T + p["fc.bias"], s


def main():
    torch.manual_seed(0)  # resnet_torch.py's time_steps: the model, then x, then y
    model = resnet20()
    x = jnp.asarray(torch.randn(BATCH, 3, 32, 32).numpy())
    y = jnp.asarray(torch.randint(0, 10, (BATCH,)).numpy())
    weights = {k: v.numpy() for k, v in model.state_dict().items() if "num_batches" not in k}
    params = {k: jnp.asarray(v) for k, v in weights.items() if ".running_" not in k}
    state = {k: jnp.asarray(v) for k, v in weights.items() if ".running_" in k}
    tx = optax.chain(optax.add_decayed_weights(5e-4), optax.sgd(0.1, momentum=0.9, nesterov=True))
    opt_state = tx.init(params)

    def step(params, state, opt_state, xb, yb):
        def loss_fn(p):
            logits, new_state = resnet(p, state, xb)
            return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean(), new_state
        (loss, state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), state, opt_state, loss

    step = jax.jit(step, donate_argnums=(0, 1, 2))
    times, first_loss = [], None
    for r in range(WARMUP + REPS):
        start = time.perf_counter()
        params, state, opt_state, loss = step(params, state, opt_state, x, y)
        jax.block_until_ready((params, state, opt_state))
        value = float(loss)
        if r == 0:
            first_loss = value
        if r >= WARMUP:
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print("RESULT " + json.dumps({"bench": "resnet20_train_step", "impl": "jax", "seconds": median,
                                  "unit_value": median * 1e3, "unit": "ms", "check": round(first_loss, 3),
                                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}),
          flush=True)


if __name__ == "__main__":
    main()
