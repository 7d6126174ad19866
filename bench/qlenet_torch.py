"""Twin of bench/qlenet.c: the tutorials' LeNet in float32 and after eager static
quantisation (QuantWrapper, fuse_modules conv+relu / linear+relu,
get_default_qconfig('onednn'), prepare, four calibration batches, convert; Debian's
1.13 has no fbgemm, so its x86 engine onednn), at batch 1 and 64, no grad, images/s."""
import json
import resource
import statistics
import time
import warnings

import torch
import torch.nn as nn
from torch.ao.quantization import QuantWrapper, convert, fuse_modules, get_default_qconfig, prepare

from twin_impl import impl_name

warnings.filterwarnings("ignore")
torch.set_num_threads(2)
torch.backends.quantized.engine = "onednn"
torch.manual_seed(1)
lenet = nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
model = QuantWrapper(lenet).eval()
torch.manual_seed(0)
inputs = torch.rand(64, 1, 28, 28)
calib = torch.rand(4, 32, 1, 28, 28)


def run(m, kind, batch):
    reps = 400 if batch == 1 else 50
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
    print("RESULT " + json.dumps({"bench": f"qlenet_{kind}_b{batch}", "impl": impl_name(), "seconds": median,
                                  "unit_value": batch / median, "unit": "images/s", "check": round(check, 4),
                                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


run(model, "f32", 1)
run(model, "f32", 64)
model.qconfig = get_default_qconfig("onednn")
fuse_modules(model.module, [["0", "1"], ["3", "4"], ["7", "8"]], inplace=True)
prepare(model, inplace=True)
with torch.no_grad():
    for c in calib:
        model(c)
convert(model, inplace=True)
run(model, "int8", 1)
run(model, "int8", 64)
