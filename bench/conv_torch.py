"""Twin of bench/conv.c: conv [64,20,12,12] * [50,20,5,5] forward + backward."""
import json
import resource
import statistics
import time

import torch
import torch.nn.functional as F

from twin_impl import impl_name

torch.set_num_threads(2)
REPS = 30
x = torch.randn(64, 20, 12, 12, requires_grad=True)
w = torch.randn(50, 20, 5, 5, requires_grad=True)
b = torch.randn(50, requires_grad=True)
times = []
for r in range(REPS + 1):
    start = time.perf_counter()
    F.conv2d(x, w, b).sum().backward()
    if r > 0:
        times.append(time.perf_counter() - start)
    check = b.grad.sum().item()
    x.grad = w.grad = b.grad = None
median = statistics.median(times)
print("RESULT " + json.dumps({"bench": "conv_lenet2_fwd_bwd", "impl": impl_name(), "seconds": median,
                              "unit_value": median * 1e3, "unit": "ms", "check": round(check, 1),
                              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
