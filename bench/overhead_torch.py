"""Twin of bench/overhead.c: a chain of 1,000 ops on 1-element tensors, forward + backward."""
import json
import resource
import statistics
import time

import torch

from twin_impl import impl_name

torch.set_num_threads(2)
CHAIN, REPS = 1000, 200
x = torch.full((1,), 1.0, requires_grad=True)
scale = torch.full((1,), 1.0001)
shift = torch.full((1,), 0.001)
times = []
for _ in range(REPS):
    start = time.perf_counter()
    y = x
    for _ in range(0, CHAIN, 2):
        y = y * scale + shift
    y.backward()
    times.append(time.perf_counter() - start)
    check = x.grad.item()
    x.grad = None
median = statistics.median(times)
print("RESULT " + json.dumps({"bench": "overhead", "impl": impl_name(), "seconds": median,
                              "unit_value": median / CHAIN * 1e6, "unit": "us/op", "check": round(check, 6),
                              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
