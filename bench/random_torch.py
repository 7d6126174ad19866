"""Twin of bench/random.c: uniform_, normal_ and dropout(p = 0.5) of 10M floats, ms."""
import json
import resource
import statistics
import time

import torch
import torch.nn.functional as F

from twin_impl import impl_name

torch.set_num_threads(2)
N, REPS = 10 * 1000 * 1000, 10
t = torch.empty(N)


def run(name, fill):
    times, check = [], 0.0
    for r in range(REPS + 1):
        torch.manual_seed(0)
        start = time.perf_counter()
        out = fill()
        if r > 0:
            times.append(time.perf_counter() - start)
        check = out[-1].item()
    median = statistics.median(times)
    print("RESULT " + json.dumps({"bench": name, "impl": impl_name(), "seconds": median, "unit_value": median * 1e3,
                                  "unit": "ms", "check": float(f"{check:.7g}"),
                                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}),
          flush=True)


run("rand_10M", lambda: t.uniform_(0, 1))
run("randn_10M", lambda: t.normal_(0, 1))
t.fill_(1.0)
run("dropout_10M", lambda: F.dropout(t, 0.5, True))
