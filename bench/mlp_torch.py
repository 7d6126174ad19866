"""PyTorch twin of tutorials/02_mlp: MLP 784-1024-512-256-128-10, ReLU, Adam lr 1e-3,
batch 64, one epoch of Fashion-MNIST in tapegrad's data order. Prints the same
RESULT line ("impl": "pytorch"). Also the shared pieces of the tutorial twins
(lenet_torch.py, lenet_bn_torch.py import them): the data set, tapegrad's shuffle
(data/loader.c tg_random_permutation over core/rng.h tg_philox, ported exactly),
the training epoch and the evaluation.

    /usr/bin/python3 bench/mlp_torch.py [--show-order] [--epochs N] [--max-steps N]
"""
import argparse
import gzip
import json
import os
import resource
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(2)

FASHION_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # TG_FASHION_MNIST_MEAN / _STD
M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF


# ---- tapegrad's shuffle, bit for bit ----

def philox(seed, counter):
    """core/rng.h tg_philox: Philox4x32-10 block `counter` under `seed`."""
    c0, c1, c2, c3 = counter & M32, (counter >> 32) & M32, 0, 0
    k0, k1 = seed & M32, (seed >> 32) & M32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        n0 = ((p1 >> 32) ^ c1 ^ k0) & M32
        n2 = ((p0 >> 32) ^ c3 ^ k1) & M32
        c1, c3, c0, c2 = p1 & M32, p0 & M32, n0, n2
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c0, c1, c2, c3


def random_permutation(n, seed, stream):
    """data/loader.c tg_random_permutation: Fisher-Yates over a Philox stream keyed by
    a Philox draw of (seed, stream); the loader uses stream = epoch."""
    k = philox(seed, stream)
    key, counter, words, used = (k[0] << 32) | k[1], 0, None, 2

    def next_u64():
        nonlocal counter, words, used
        if used == 2:
            words, counter, used = philox(key, counter), counter + 1, 0
        i = 2 * used
        used += 1
        return (words[i] << 32) | words[i + 1]

    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        bound = i + 1
        threshold = (M64 + 1 - bound) % bound  # (0 - bound) % bound in uint64
        while True:
            r = next_u64()
            if r >= threshold:
                break
        j = r % bound
        perm[i], perm[j] = perm[j], perm[i]
    return perm


# What `bazel-bin/tutorials/02_mlp/02_mlp --show-order` prints (seed 1, 60000 images).
C_ORDER_SEED1_60000 = [41527, 9738, 27523, 6979, 51026, 48275, 18347, 51293, 36518, 44585]


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

def train_epoch(model, opt, x, y, perm, batch_size, max_steps=0):
    """One epoch in the order `perm`; returns (seconds, mean loss, steps)."""
    model.train()
    order = torch.tensor(perm)
    n, steps, loss_sum = len(perm), 0, 0.0
    start = time.perf_counter()
    for begin in range(0, n, batch_size):
        if max_steps and steps >= max_steps:
            break
        idx = order[begin:begin + batch_size]
        xb, yb = x[idx], y[idx]
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_sum += loss.item()
        steps += 1
    return time.perf_counter() - start, loss_sum / max(steps, 1), steps


@torch.no_grad()
def evaluate(model, x, y, batch_size=1000):
    model.eval()
    correct = 0
    for begin in range(0, len(x), batch_size):
        correct += (model(x[begin:begin + batch_size]).argmax(1) == y[begin:begin + batch_size]).sum().item()
    model.train()
    return 100.0 * correct / len(x)


def print_result(bench, seconds, accuracy):
    print("RESULT " + json.dumps({"bench": bench, "impl": "pytorch", "seconds": round(seconds, 3),
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
    return p.parse_args()


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
    if args.init:  # the tutorial's own initial weights: both start at the same place
        model.load_state_dict(load_safetensors(args.init), strict=True)
    opt = make_opt(model, args.lr)
    sched = make_sched(opt) if make_sched else None
    seconds = accuracy = 0
    for epoch in range(args.epochs):
        perm = random_permutation(len(train_x), args.seed, epoch)  # before the clock starts, as tg_loader_reset
        if epoch == 0:
            check_order(perm, args.seed, len(train_x))
            if args.show_order:
                print("order:", " ".join(map(str, perm[:10])))
        seconds, loss, steps = train_epoch(model, opt, train_x, train_y, perm, args.batch_size, args.max_steps)
        accuracy = evaluate(model, test_x, test_y)
        print(f"epoch {epoch + 1}: train loss {loss:.4f}, test accuracy {accuracy:.2f}%, {steps} steps, {seconds:.1f} s",
              flush=True)
        if sched:
            sched.step()
    print_result(bench, seconds, accuracy)


def make_mlp():
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(),
                         nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


if __name__ == "__main__":
    run("mlp_epoch", make_mlp, lambda m, lr: torch.optim.Adam(m.parameters(), lr=lr), False,
        parse_args(1e-3, "PyTorch twin of tutorials/02_mlp"))
