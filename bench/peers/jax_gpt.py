"""JAX twin of tutorials/10_gpt and bench/gpt_torch.py: nanoGPT's model (one qkv
Linear, causal attention by `jax.nn.dot_product_attention`, tanh GELU, the head tied to
the token embedding, no dropout) and train.py's loop, written as a JAX user would: one
`jax.jit` train step with its buffers donated (forward, cross entropy,
`jax.value_and_grad`, optax: the global gradient norm clipped at 1.0, then AdamW with
betas (0.9, 0.99) and weight decay 0.1 on the 2-D weights only, the learning rate
warmed up linearly then cosine-annealed to lr / 10 as the lesson's LinearLR +
CosineAnnealingLR). It starts from the lesson's weights (--init: its --save-init file;
without it PyTorch's for the seed) and draws the same windows: the window starts come
from torch.randint under the same seed in the same order as the lesson and
gpt_torch.py (estimate_loss's draws included), and numpy gathers the windows. The step
and the evaluation are compiled ahead of time, before the clock; the step time is
what the lesson and gpt_torch.py time (drawing the batch, the step, reading the
loss). Prints the same lines and a RESULT line ("impl": "jax", seconds per step,
"check": the last validation loss).

    bazel-bin/tutorials/10_gpt/10_gpt --max-steps 50 --save-init gpt_init.safetensors
    $(bench/peers/setup.sh) bench/peers/jax_gpt.py --max-steps 50 --init gpt_init.safetensors
"""
import argparse
import json
import math
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import torch  # noqa: E402  (the corpus, the initial weights and the window draws only)

from gpt_torch import GPT, load_ids  # noqa: E402
from mlp_torch import load_safetensors  # noqa: E402

LN_EPS = 1e-5


def linear(p, name, x, bias=True):
    y = x @ p[name + ".weight"].T
    return y + p[name + ".bias"] if bias else y


def layer_norm(p, name, x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + LN_EPS) * p[name + ".weight"] + p[name + ".bias"]


def gpt(p, idx, n_layer, n_head):
    B, T = idx.shape
    x = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][:T]
    C = x.shape[-1]
    for i in range(n_layer):
        h = f"transformer.h.{i}."
        q, k, v = jnp.split(linear(p, h + "attn.c_attn", layer_norm(p, h + "ln_1", x)), 3, axis=-1)
        q, k, v = (t.reshape(B, T, n_head, C // n_head) for t in (q, k, v))  # [B, T, heads, head size]
        y = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(B, T, C)
        x = x + linear(p, h + "attn.c_proj", y)
        m = jax.nn.gelu(linear(p, h + "mlp.c_fc", layer_norm(p, h + "ln_2", x)), approximate=True)
        x = x + linear(p, h + "mlp.c_proj", m)
    return layer_norm(p, "transformer.ln_f", x) @ p["transformer.wte.weight"].T  # the head tied to wte


def lr_schedule(lr, warmup, max_steps):
    """The learning rate of update `count` (0 first): LinearLR from 1 / (warmup + 1) for
    `warmup` steps, then CosineAnnealingLR over the rest down to lr / 10."""
    eta_min, decay = lr / 10, max_steps - warmup

    def schedule(count):
        cosine = eta_min + (lr - eta_min) * (1 + jnp.cos(math.pi * (count - warmup) / decay)) / 2
        return jnp.where(count < warmup, lr * (count + 1) / (warmup + 1), cosine)
    return schedule


def main():
    p = argparse.ArgumentParser(description="JAX twin of tutorials/10_gpt")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--max-steps", type=int, default=2000)
    p.add_argument("--eval-interval", type=int, default=100)
    p.add_argument("--eval-iters", type=int, default=20)
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--data", default="/usr/share/games/fortunes")
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--init", help="start from these weights (the lesson's --save-init safetensors file)")
    p.add_argument("--flush-denormal", action="store_true",
                   help="accepted for bench/compare.sh: XLA's CPU client flushes subnormals to zero in every run")
    args = p.parse_args()

    ids, vocab = load_ids(args.data, args.synthetic, args.seed)
    n = len(ids) * 9 // 10
    train, val = ids[:n], ids[n:]
    print(f"corpus: {len(ids)} characters ({len(train)} train, {len(val)} validation), vocabulary {vocab}")
    if args.init:
        weights = load_safetensors(args.init)
    else:
        torch.manual_seed(args.seed)
        weights = GPT(vocab, args.n_layer, args.n_head, args.n_embd, args.block_size).state_dict()
    params = {k: jnp.asarray(v.numpy()) for k, v in weights.items() if k != "lm_head.weight"}  # tied: wte
    print(f"model: GPT, {sum(v.size for v in params.values())} parameters, attention jax.nn.dot_product_attention")

    warmup = args.warmup_steps if args.warmup_steps < args.max_steps else args.max_steps // 10
    tx = optax.chain(
        optax.clip_by_global_norm(args.clip),
        optax.adamw(lr_schedule(args.lr, warmup, args.max_steps), b1=0.9, b2=0.99, eps=1e-8,
                    weight_decay=args.weight_decay, mask=lambda ps: jax.tree.map(lambda w: w.ndim >= 2, ps)))
    opt_state = tx.init(params)
    schedule = lr_schedule(args.lr, warmup, args.max_steps)

    def loss_of(params, x, y):
        logits = gpt(params, x, args.n_layer, args.n_head)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_of)(params, x, y)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    train_np, val_np = train.numpy().astype(np.int32), val.numpy().astype(np.int32)
    offsets = np.arange(args.block_size)

    def get_batch(data):
        ix = torch.randint(len(data) - args.block_size, (args.batch_size,)).numpy()
        rows = ix[:, None] + offsets
        return data[rows], data[rows + 1]

    start = time.perf_counter()  # both programs compiled ahead of time, before the clock
    shape = jax.ShapeDtypeStruct((args.batch_size, args.block_size), train_np.dtype)
    train_step = jax.jit(step, donate_argnums=(0, 1)).lower(params, opt_state, shape, shape).compile()
    eval_loss = jax.jit(loss_of).lower(params, shape, shape).compile()
    print(f"compile: {time.perf_counter() - start:.1f} s (not timed)")

    def estimate_loss(data):
        return sum(float(eval_loss(params, *get_batch(data))) for _ in range(args.eval_iters)) / args.eval_iters

    torch.manual_seed(args.seed)  # the lesson's batches start from the seed afresh
    train_seconds, val_loss = 0.0, float("nan")
    for it in range(args.max_steps + 1):
        if it % args.eval_interval == 0 or it == args.max_steps:
            train_estimate = estimate_loss(train_np)
            val_loss = estimate_loss(val_np)
            print(f"step {it}: train loss {train_estimate:.4f}, val loss {val_loss:.4f}", flush=True)
        if it == args.max_steps:
            break
        start = time.perf_counter()
        x, y = get_batch(train_np)
        params, opt_state, loss = train_step(params, opt_state, x, y)
        jax.block_until_ready(params)
        value = float(loss)
        seconds = time.perf_counter() - start
        train_seconds += seconds
        if (it + 1) % args.log_interval == 0:
            print(f"iter {it + 1}: loss {value:.4f}, lr {float(schedule(it)):.3e}, {seconds * 1000:.0f} ms", flush=True)
    step_seconds = train_seconds / args.max_steps
    print(f"training: {args.max_steps} steps in {train_seconds:.1f} s, {step_seconds * 1000:.0f} ms/step, "
          f"{args.batch_size * args.block_size / step_seconds:.0f} tokens/s")
    print("RESULT " + json.dumps({"bench": "gpt_step", "impl": "jax", "seconds": round(step_seconds, 3),
                                  "unit_value": round(step_seconds, 3), "unit": "s", "check": round(val_loss, 2),
                                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}),
          flush=True)


if __name__ == "__main__":
    main()
