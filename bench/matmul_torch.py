"""Twin of bench/matmul.c: float32 and bfloat16 GEMM GFLOP/s at n = 256 .. 2048, the two
dtypes alternating rep by rep. The same seed gives both the same inputs, so the check
(c[0, 0]) agrees to float32 (bfloat16) rounding."""
import json
import resource
import statistics
import time

import torch

from twin_impl import impl_name

torch.set_num_threads(2)
for n in (256, 512, 1024, 2048):
    reps = 50 if n <= 512 else 10 if n == 1024 else 5
    torch.manual_seed(0)
    a, b = torch.randn(n, n), torch.randn(n, n)
    operands = {"matmul": (a, b), "matmul_bf16": (a.bfloat16(), b.bfloat16())}
    times = {name: [] for name in operands}
    check = {}
    for r in range(reps + 1):
        for name, (x, y) in operands.items():
            start = time.perf_counter()
            c = x @ y
            if r == 0:
                check[name] = c[0, 0].float().item()
            if r > 0:
                times[name].append(time.perf_counter() - start)
    for name in operands:
        median = statistics.median(times[name])
        print("RESULT " + json.dumps({"bench": f"{name}_{n}", "impl": impl_name(), "seconds": median,
                                      "unit_value": 2 * n ** 3 / median * 1e-9, "unit": "GFLOP/s",
                                      "check": round(check[name], 4),
                                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
