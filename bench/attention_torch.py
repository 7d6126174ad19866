"""Twin of bench/attention.c: attention forward + backward, float32, batch 1, no mask, at
T = 256, 1024, 4096 for one head of 64 and four heads of 32. PyTorch 1.13 (Debian's) has
no F.scaled_dot_product_attention, so there it is composed as softmax(q k^T / sqrt(E)) v
(what PyTorch 2's math backend does on a CPU); under PyTorch 2 the twin calls
F.scaled_dot_product_attention itself (its fused CPU kernel from 2.1 on)."""
import json
import math
import resource
import statistics
import time

import torch
import torch.nn.functional as F

from twin_impl import impl_name

torch.set_num_threads(2)
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def attention(q, k, v):
    if HAS_SDPA:
        return F.scaled_dot_product_attention(q, k, v)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


for heads, dim in ((1, 64), (4, 32)):
    for t in (256, 1024, 4096):
        reps = 30 if t <= 256 else 8 if t == 1024 else 3
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, heads, t, dim, requires_grad=True) for _ in range(3))
        times, check = [], 0.0
        for r in range(reps + 1):
            start = time.perf_counter()
            attention(q, k, v).sum().backward()
            if r == 0:
                check = q.grad.sum().item()
            q.grad = k.grad = v.grad = None
            if r > 0:
                times.append(time.perf_counter() - start)
        median = statistics.median(times)
        flops = 4.0 * heads * t * t * dim * 2.5
        print("RESULT " + json.dumps({"bench": f"attention_{heads}x{dim}_{t}", "impl": impl_name(), "seconds": median,
                                      "unit_value": flops / median * 1e-9, "unit": "GFLOP/s",
                                      "check": round(check, 4),
                                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
