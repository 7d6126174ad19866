"""Twin of bench/conv.c: conv [64,20,12,12] * [50,20,5,5] forward + backward, float32
and bfloat16 (oneDNN's bf16 convolution), and a MobileNet-like depthwise 3x3 layer
[64,128,28,28] * [128,1,3,3] (stride 1, padding 1, groups 128) in float32, alternating
rep by rep."""
import json
import resource
import statistics
import time

import torch
import torch.nn.functional as F

from twin_impl import impl_name

torch.set_num_threads(2)
REPS = 30
x = torch.randn(64, 20, 12, 12)
w = torch.randn(50, 20, 5, 5)
b = torch.randn(50)
dw_shapes = ((64, 128, 28, 28), (128, 1, 3, 3), (128,))
leaves = {"conv_lenet2_fwd_bwd": [t.clone().requires_grad_() for t in (x, w, b)],
          "conv_bf16_lenet2_fwd_bwd": [t.bfloat16().requires_grad_() for t in (x, w, b)],
          "conv_dw_mobilenet_fwd_bwd": [torch.randn(s).requires_grad_() for s in dw_shapes]}
options = {"conv_dw_mobilenet_fwd_bwd": {"padding": 1, "groups": 128}}
times = {name: [] for name in leaves}
check = {}
for r in range(REPS + 1):
    for name, (xi, wi, bi) in leaves.items():
        start = time.perf_counter()
        F.conv2d(xi, wi, bi, **options.get(name, {})).sum().backward()
        if r > 0:
            times[name].append(time.perf_counter() - start)
        check[name] = bi.grad.float().sum().item()
        xi.grad = wi.grad = bi.grad = None
for name in leaves:
    median = statistics.median(times[name])
    print("RESULT " + json.dumps({"bench": name, "impl": impl_name(), "seconds": median,
                                  "unit_value": median * 1e3, "unit": "ms", "check": round(check[name], 1),
                                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
