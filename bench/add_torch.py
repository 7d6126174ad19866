"""Twin of bench/add.c: 16M-float add into an existing output, GB/s."""
import json
import resource
import statistics
import time

import torch

from twin_impl import impl_name

torch.set_num_threads(2)
N, REPS = 16 * 1024 * 1024, 30
a, b, c = torch.full((N,), 1.5), torch.full((N,), 2.0), torch.empty(N)
times = []
for r in range(REPS + 1):
    start = time.perf_counter()
    torch.add(a, b, out=c)
    if r > 0:
        times.append(time.perf_counter() - start)
median = statistics.median(times)
print("RESULT " + json.dumps({"bench": "add_16M", "impl": impl_name(), "seconds": median,
                              "unit_value": 3 * N * 4 / median * 1e-9, "unit": "GB/s", "check": round(c[-1].item(), 2),
                              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
