"""PyTorch twin of bench/gpu_bench.c: the same workloads on the same GPU.

  matmul_4096 (TF32 off / on), add_256M, copy_256M, mlp_step_64, mlp_step_4096.
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


def bench_matmul(tf32):
    n = 4096
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    t = timed(lambda: a @ b)
    torch.backends.cuda.matmul.allow_tf32 = False
    result("matmul_4096_tf32" if tf32 else "matmul_4096", t, 2 * n**3 / t * 1e-12, "TFLOP/s")


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


def bench_mlp(batch):
    torch.manual_seed(0)
    sizes = [784, 1024, 512, 256, 128, 10]
    layers = []
    for i in range(5):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < 4:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(batch, 784, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    state = {}

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        state["loss"] = loss

    t = timed(step, warmup=3)
    result("mlp_step_%d" % batch, t, t * 1e3, "ms/step", loss=round(state["loss"].item(), 4))


def main():
    if not torch.cuda.is_available():
        print("SKIPPED gpu_bench_torch: no CUDA device")
        return
    print("# torch %s, %s" % (torch.__version__, torch.cuda.get_device_name(0)))
    bench_matmul(False)
    bench_matmul(True)
    bench_add_and_copy()
    bench_mlp(64)
    bench_mlp(4096)


if __name__ == "__main__":
    main()
