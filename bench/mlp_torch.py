"""PyTorch twin of tutorials/02_mlp: MLP 784-1024-512-256-128-10, ReLU, Adam lr 1e-3,
batch 64, one epoch of Fashion-MNIST. The same seed gives both programs the same
initial weights (tapegrad's CPU generator is PyTorch's) and the same data order
(tapegrad's loader is DataLoader with its own generator). Prints the same RESULT
line ("impl": "pytorch"). Also the shared pieces of the tutorial twins
(lenet_torch.py, lenet_bn_torch.py import them): the data set, the data order, the
training epoch and the evaluation.

    /usr/bin/python3 bench/mlp_torch.py [--show-order] [--epochs N] [--max-steps N]
    $(bench/peers/setup.sh) bench/mlp_torch.py [--compile]    # PyTorch 2, eager or compiled
    /usr/bin/python3 bench/mlp_torch.py --amp                   # bfloat16 autocast (mlp_amp_epoch)

With --compile (PyTorch 2) the model runs through torch.compile; the steps that
compile (the first, and the odd-sized last batch) count at the median step time, so
the epoch time is the compiled program's, not the compiler's.
"""
import argparse
import gzip
import json
import os
import resource
import statistics
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from twin_impl import impl_name

torch.set_num_threads(2)

FASHION_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # TG_FASHION_MNIST_MEAN / _STD


# ---- the data order ----

def loader_orders(n, seed):
    """The sample order of each epoch of DataLoader(shuffle=True,
    generator=torch.Generator().manual_seed(seed)), which tapegrad's loader reproduces
    (a base seed drawn per epoch, then torch.randperm). Indexing the tensors in this
    order is the same training as iterating that DataLoader, without its collate cost."""
    g = torch.Generator()
    g.manual_seed(seed)
    while True:
        torch.empty((), dtype=torch.int64).random_(generator=g)
        yield torch.randperm(n, generator=g).tolist()


# What `bazel-bin/tutorials/02_mlp/02_mlp --show-order` prints (seed 1, 60000 images).
C_ORDER_SEED1_60000 = [50124, 10125, 11281, 57829, 15067, 3946, 14801, 52746, 44136, 36786]


def check_order(perm, seed, n):
    if seed == 1 and n == 60000:
        assert perm[:10] == C_ORDER_SEED1_60000, f"shuffle differs from tapegrad's: {perm[:10]}"


# ---- data ----

def read_idx(path):
    with gzip.open(path) if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    assert zero == 0 and dtype == 0x08, path
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def find(directory, stem):
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{stem} in {directory}")


def load_fashion(directory=FASHION_DIR, image_shape=False):
    """(train_x, train_y, test_x, test_y): x float32 (img / 255 - mean) / std as
    [N, 784] or [N, 1, 28, 28], y int64 — tapegrad's tut_load_data."""
    out = []
    for split in ("train", "t10k"):
        images = read_idx(find(directory, f"{split}-images-idx3-ubyte"))
        labels = read_idx(find(directory, f"{split}-labels-idx1-ubyte")).long()
        x = (images.float() / 255 - MEAN) / STD
        x = x.reshape(-1, 1, 28, 28) if image_shape else x.reshape(-1, 784)
        out += [x.contiguous(), labels]
    return out


# ---- training and evaluation ----

def train_epoch(model, opt, x, y, perm, batch_size, max_steps=0, compiled=False, amp=False):
    """One epoch in the order `perm`; returns (seconds, mean loss, steps). With
    `compiled`, the steps that run the compiler (a batch shape not seen before) count
    at the median step time. With `amp`, forward and loss run under bfloat16 CPU
    autocast (the tutorials' --amp bf16: float32 weights, no loss scaling)."""
    model.train()
    order = torch.tensor(perm)
    n, steps, loss_sum = len(perm), 0, 0.0
    step_times, compile_steps, shapes = [], [], set()
    for begin in range(0, n, batch_size):
        if max_steps and steps >= max_steps:
            break
        start = time.perf_counter()
        idx = order[begin:begin + batch_size]
        xb, yb = x[idx], y[idx]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_sum += loss.item()
        step_times.append(time.perf_counter() - start)
        if compiled and len(idx) not in shapes:
            compile_steps.append(steps)
        shapes.add(len(idx))
        steps += 1
    if compile_steps and len(step_times) > len(compile_steps):
        median = statistics.median(t for i, t in enumerate(step_times) if i not in compile_steps)
        for i in compile_steps:
            step_times[i] = median
    return sum(step_times), loss_sum / max(steps, 1), steps


@torch.no_grad()
def evaluate(model, x, y, batch_size=1000):
    model.eval()
    correct = 0
    for begin in range(0, len(x), batch_size):
        correct += (model(x[begin:begin + batch_size]).argmax(1) == y[begin:begin + batch_size]).sum().item()
    model.train()
    return 100.0 * correct / len(x)


def print_result(bench, seconds, accuracy, compiled=False):
    print("RESULT " + json.dumps({"bench": bench, "impl": impl_name(compiled), "seconds": round(seconds, 3),
                                  "unit_value": round(seconds, 3), "unit": "s", "check": round(accuracy, 2),
                                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}),
          flush=True)


def parse_args(lr, description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=FASHION_DIR)
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--show-order", action="store_true", help="print the first 10 sample indices of epoch 0")
    p.add_argument("--init", help="start from these weights (a tutorial's --save-init safetensors file)")
    p.add_argument("--compile", action="store_true", help="train through torch.compile (PyTorch 2)")
    p.add_argument("--amp", action="store_true",
                   help="bfloat16 autocast around forward and loss (the tutorials' --amp bf16); RESULT bench *_amp_epoch")
    p.add_argument("--flush-denormal", action="store_true",
                   help="torch.set_flush_denormal(True) (the tutorials' --flush-denormal)")
    args = p.parse_args()
    # Before the first parallel op: PyTorch sets the calling thread's flags, and its
    # OpenMP threads copy them when they are created.
    if args.flush_denormal and not torch.set_flush_denormal(True):
        raise SystemExit("torch.set_flush_denormal is not supported on this CPU")
    return args


def load_safetensors(path):
    """The tensors of a safetensors file (8-byte header length, JSON header, raw data)."""
    import json
    import struct
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
              "U8": torch.uint8, "BOOL": torch.bool}
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtypes[info["dtype"]]) if end > begin else \
            torch.empty(0, dtype=dtypes[info["dtype"]])
        out[name] = t.reshape(info["shape"]).clone()
    return out


def run(bench, make_model, make_opt, image_shape, args, make_sched=None):
    """Loads the data, trains args.epochs epochs in tapegrad's order, prints per-epoch
    accuracy and the RESULT line of the last epoch."""
    train_x, train_y, test_x, test_y = load_fashion(args.data, image_shape)
    torch.manual_seed(args.seed)
    model = make_model()
    if args.init:  # the tutorial's own weights (the same as PyTorch's for the seed; a check)
        model.load_state_dict(load_safetensors(args.init), strict=True)
    opt = make_opt(model, args.lr)
    trained = torch.compile(model) if args.compile else model
    sched = make_sched(opt) if make_sched else None
    seconds = accuracy = 0
    orders = loader_orders(len(train_x), args.seed)
    for epoch in range(args.epochs):
        perm = next(orders)  # before the clock starts, as tg_loader_reset
        if epoch == 0:
            check_order(perm, args.seed, len(train_x))
            if args.show_order:
                print("order:", " ".join(map(str, perm[:10])))
        seconds, loss, steps = train_epoch(trained, opt, train_x, train_y, perm, args.batch_size, args.max_steps,
                                            args.compile, args.amp)
        accuracy = evaluate(model, test_x, test_y)
        print(f"epoch {epoch + 1}: train loss {loss:.4f}, test accuracy {accuracy:.2f}%, {steps} steps, {seconds:.1f} s",
              flush=True)
        if sched:
            sched.step()
    print_result(bench.replace("_epoch", "_amp_epoch") if args.amp else bench, seconds, accuracy, args.compile)


def make_mlp():
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(),
                         nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


if __name__ == "__main__":
    run("mlp_epoch", make_mlp, lambda m, lr: torch.optim.Adam(m.parameters(), lr=lr), False,
        parse_args(1e-3, "PyTorch twin of tutorials/02_mlp"))
