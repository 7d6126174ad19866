"""Twin of bench/qmlp.c: lesson 02's MLP in float32 and after
torch.ao.quantization.quantize_dynamic (qint8 weights; Debian's 1.13 has no fbgemm,
so its x86 engine onednn), at batch 1 and 64, no grad, images/s."""
import json
import resource
import statistics
import time

import torch
import torch.nn as nn
from torch.ao.quantization import quantize_dynamic

from twin_impl import impl_name

torch.set_num_threads(2)
torch.manual_seed(1)
model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 256),
                      nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)).eval()
torch.manual_seed(0)
inputs = torch.randn(64, 784)


def run(m, kind, batch):
    reps = 400 if batch == 1 else 100
    x = inputs[:batch]
    times = []
    with torch.no_grad():
        for r in range(reps + 1):
            start = time.perf_counter()
            y = m(x)
            if r == 0:
                check = y.reshape(-1)[0].item()
            else:
                times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print("RESULT " + json.dumps({"bench": f"qmlp_{kind}_b{batch}", "impl": impl_name(), "seconds": median,
                                  "unit_value": batch / median, "unit": "images/s", "check": round(check, 4),
                                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


run(model, "f32", 1)
run(model, "f32", 64)
qmodel = quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
run(qmodel, "int8", 1)
run(qmodel, "int8", 64)
