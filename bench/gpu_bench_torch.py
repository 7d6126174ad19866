"""PyTorch twin of bench/gpu_bench.c: the same workloads on the same GPU.

  matmul_4096 (float32 with TF32 off / on, bf16, fp16), add_256M, copy_256M,
  mlp_step_64, mlp_step_4096, lenet_bn_step_64, each step also under
  torch.autocast("cuda", bfloat16 / float16) (fp16 with torch.amp.GradScaler);
  under PyTorch 2 also mlp_step_64 through torch.compile(mode="reduce-overhead")
  (impl "torch-reduce-overhead").
Prints the same RESULT lines (impl "torch"). Run by tools/gpu_check.sh run."""
import json
import statistics
import time

import torch

REPS = 10


def result(name, seconds, value, unit, **extra):
    line = {"bench": name, "impl": "torch", "seconds": seconds, "unit_value": value, "unit": unit}
    line.update(extra)
    print("RESULT " + json.dumps(line), flush=True)


def timed(fn, warmup=1):
    times = []
    for r in range(REPS + warmup):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        if r >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_matmul(kind):
    n = 4096
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    if kind in ("bf16", "fp16"):
        dtype = torch.bfloat16 if kind == "bf16" else torch.float16
        a, b = a.to(dtype), b.to(dtype)
    torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
    t = timed(lambda: a @ b)
    torch.backends.cuda.matmul.allow_tf32 = False
    result("matmul_4096" + ("_" + kind if kind else ""), t, 2 * n**3 / t * 1e-12, "TFLOP/s")


def bench_add_and_copy():
    n = 1 << 28
    a = torch.full((n,), 1.0, device="cuda")
    b = torch.full((n,), 2.0, device="cuda")
    dst = torch.empty(n, device="cuda")
    t = timed(lambda: a + b)
    result("add_256M", t, 3 * 4 * n / t * 1e-9, "GB/s")
    t = timed(lambda: dst.copy_(a))
    result("copy_256M", t, 2 * 4 * n / t * 1e-9, "GB/s")
    del a, b, dst
    torch.cuda.empty_cache()


def make_mlp():
    sizes = [784, 1024, 512, 256, 128, 10]
    layers = []
    for i in range(5):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < 4:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def make_lenet_bn():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 20, 5), nn.BatchNorm2d(20), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(20, 50, 5), nn.BatchNorm2d(50), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))


def bench_step(model_name, batch, amp=None, compile_mode=None):
    """compile_mode: None (eager) or torch.compile's mode ("reduce-overhead": CUDA graphs)
    for the model's forward and backward; the optimizer steps eagerly, as users write it."""
    torch.manual_seed(0)
    lenet = model_name == "lenet_bn"
    model = (make_lenet_bn() if lenet else make_mlp()).cuda()
    forward = torch.compile(model, mode=compile_mode) if compile_mode else model
    if lenet:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.rand(batch, 1, 28, 28, device="cuda")
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x = torch.rand(batch, 784, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    dtype = torch.float16 if amp == "fp16" else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda", enabled=amp == "fp16")
    state = {}

    def step():
        with torch.autocast("cuda", dtype=dtype, enabled=amp is not None):
            loss = torch.nn.functional.cross_entropy(forward(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        state["loss"] = loss

    t = timed(step, warmup=3 if not compile_mode else 10)  # compilation and graph capture untimed
    name = "%s_step_%d%s" % (model_name, batch, "_amp_" + amp if amp else "")
    line = {"impl": "torch-" + compile_mode} if compile_mode else {}
    result(name, t, t * 1e3, "ms/step", loss=round(state["loss"].item(), 4), **line)


def main():
    if not torch.cuda.is_available():
        print("SKIPPED gpu_bench_torch: no CUDA device")
        return
    print("# torch %s, %s" % (torch.__version__, torch.cuda.get_device_name(0)))
    for kind in ("", "tf32", "bf16", "fp16"):
        bench_matmul(kind)
    bench_add_and_copy()
    for amp in (None, "bf16", "fp16"):
        bench_step("mlp", 64, amp)
        bench_step("mlp", 4096, amp)
        bench_step("lenet_bn", 64, amp)
    if hasattr(torch, "compile"):  # issue 34's peer: the step's launches replayed as a CUDA graph
        bench_step("mlp", 64, None, compile_mode="reduce-overhead")


if __name__ == "__main__":
    main()
