"""JAX twins of bench/overhead.c, bench/matmul.c and bench/conv.c, with the RESULT lines
of the PyTorch twins ("impl": "jax").
- overhead: the same chain of 1,000 ops on 1-element arrays, forward + backward, run
  eagerly (`jax.grad` without `jit`): JAX's per-op dispatch cost.
- matmul_N: `jax.jit(jnp.matmul)` on float32 n x n, n = 256 .. 2048.
- conv_lenet2_fwd_bwd: `jax.jit(jax.grad)` of conv [64,20,12,12] * [50,20,5,5] + bias, summed.

    $(bench/peers/setup.sh) bench/peers/jax_micro.py [overhead] [matmul] [conv]
"""
import json
import resource
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np


def result(bench, seconds, unit_value, unit, check):
    print("RESULT " + json.dumps({"bench": bench, "impl": "jax", "seconds": seconds, "unit_value": unit_value,
                                  "unit": unit, "check": check,
                                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}),
          flush=True)


def overhead(chain=1000, reps=20):
    scale, shift = jnp.full((1,), 1.0001), jnp.full((1,), 0.001)

    def f(x):
        y = x
        for _ in range(0, chain, 2):
            y = y * scale + shift
        return y.sum()

    grad = jax.grad(f)
    x = jnp.full((1,), 1.0)
    times = []
    for _ in range(reps + 1):
        start = time.perf_counter()
        g = grad(x).block_until_ready()
        times.append(time.perf_counter() - start)
    median = statistics.median(times[1:])
    result("overhead", median, median / chain * 1e6, "us/op", round(float(g[0]), 6))


def matmul():
    mm = jax.jit(jnp.matmul)
    for n in (256, 512, 1024, 2048):
        reps = 50 if n <= 512 else 10 if n == 1024 else 5
        rng = np.random.default_rng(0)
        a = jnp.asarray(rng.standard_normal((n, n), dtype=np.float32))
        b = jnp.asarray(rng.standard_normal((n, n), dtype=np.float32))
        mm(a, b).block_until_ready()
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            c = mm(a, b).block_until_ready()
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        # Other inputs than the C and PyTorch programs (NumPy's generator): the check differs.
        result(f"matmul_{n}", median, 2 * n ** 3 / median * 1e-9, "GFLOP/s", round(float(c[0, 0]), 4))


def conv(reps=30):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((64, 20, 12, 12), dtype=np.float32))
    w = jnp.asarray(rng.standard_normal((50, 20, 5, 5), dtype=np.float32))
    b = jnp.asarray(rng.standard_normal((50,), dtype=np.float32))

    def f(x, w, b):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return (y + b[None, :, None, None]).sum()

    step = jax.jit(jax.grad(f, argnums=(0, 1, 2)))
    jax.block_until_ready(step(x, w, b))
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        gx, gw, gb = jax.block_until_ready(step(x, w, b))
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    result("conv_lenet2_fwd_bwd", median, median * 1e3, "ms", round(float(gb.sum()), 1))


if __name__ == "__main__":
    chosen = sys.argv[1:] or ["overhead", "matmul", "conv"]
    for name in chosen:
        {"overhead": overhead, "matmul": matmul, "conv": conv}[name]()
