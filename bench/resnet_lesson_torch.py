"""PyTorch twin of tutorials/13_resnet's default run: ResNet-20 (bench/resnet_torch.py's,
the lesson's names) on Fashion-MNIST padded to 32 x 32 with one channel; per sample
RandomCrop(32, padding=4) with zeros and RandomHorizontalFlip(), then ToTensor and
Normalize(0.2860, 0.3530); SGD lr 0.2 (OneCycleLR's peak, pct_start 0.25,
cycle_momentum=False, stepped per batch) momentum 0.9 nesterov weight decay 5e-4, batch
128, 10 epochs, the test accuracy after each. With --init it starts from the lesson's
weights (its --save-init file), and the epochs visit the samples in the lesson's order
(tapegrad's loader is DataLoader's shuffle with its own generator). The crops and flips
are drawn from PyTorch's default generator, one batch at a time, so they are not the
lesson's (its 2 loader workers draw from generators of their own, as DataLoader's
workers do): the twin is the same recipe from the same start, which is what "lands
within 0.3 point" compares.

    bazel-bin/tutorials/13_resnet/13_resnet --save-init r13_init.safetensors --result-line
    /usr/bin/python3 bench/resnet_lesson_torch.py --init r13_init.safetensors
    $(bench/peers/setup.sh) bench/resnet_lesson_torch.py --init r13_init.safetensors [--compile]

Prints per-epoch lines as the lesson does and the RESULT line of the last epoch
("resnet20_epoch": that epoch's seconds, "check": the final test accuracy).
"""
import argparse
import time

import torch
import torch.nn.functional as F

from mlp_torch import FASHION_DIR, MEAN, STD, find, load_safetensors, loader_orders, print_result, read_idx
from resnet_torch import resnet20  # also sets 2 threads, as the other twins

PAD, CROP_PAD, SIZE = 2, 4, 32  # 28 -> 32 by 2 zeros a side (tg_pad), then RandomCrop(32, padding=4)


def load_padded(directory):
    """(train uint8 [N, 1, 32, 32], train labels, test float32 normalised, test labels)."""
    out = []
    for split in ("train", "t10k"):
        images = read_idx(find(directory, f"{split}-images-idx3-ubyte")).reshape(-1, 1, 28, 28)
        labels = read_idx(find(directory, f"{split}-labels-idx1-ubyte")).long()
        out += [F.pad(images, (PAD, PAD, PAD, PAD)), labels]
    train_x, train_y, test_x, test_y = out
    return train_x, train_y, (test_x.float() / 255 - MEAN) / STD, test_y


def augment(images):
    """RandomCrop(32, padding=4) with zeros, then RandomHorizontalFlip(), per sample;
    ToTensor and Normalize: uint8 [B, 1, 32, 32] -> float32."""
    b = images.shape[0]
    canvas = F.pad(images, (CROP_PAD,) * 4)
    top = torch.randint(0, 2 * CROP_PAD + 1, (b,)).tolist()
    left = torch.randint(0, 2 * CROP_PAD + 1, (b,)).tolist()
    flip = (torch.rand(b) < 0.5).tolist()
    out = torch.empty(b, images.shape[1], SIZE, SIZE, dtype=torch.uint8)
    for s in range(b):
        crop = canvas[s, :, top[s]:top[s] + SIZE, left[s]:left[s] + SIZE]
        out[s] = crop.flip(-1) if flip[s] else crop
    return (out.float() / 255 - MEAN) / STD


@torch.no_grad()
def evaluate(model, x, y, batch_size=1000):
    model.eval()
    correct, loss = 0, 0.0
    for begin in range(0, len(x), batch_size):
        logits = model(x[begin:begin + batch_size])
        loss += F.cross_entropy(logits, y[begin:begin + batch_size], reduction="sum").item()
        correct += (logits.argmax(1) == y[begin:begin + batch_size]).sum().item()
    model.train()
    return loss / len(x), 100.0 * correct / len(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.2, help="OneCycleLR's max_lr")
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=FASHION_DIR)
    p.add_argument("--max-steps", type=int, default=0, help="stop after N steps (a smoke run)")
    p.add_argument("--init", help="start from these weights (the lesson's --save-init file)")
    p.add_argument("--compile", action="store_true", help="train through torch.compile (PyTorch 2)")
    args = p.parse_args()

    train_x, train_y, test_x, test_y = load_padded(args.data)
    torch.manual_seed(args.seed)
    model = resnet20(in_channels=1, num_classes=10)
    if args.init:
        model.load_state_dict(load_safetensors(args.init), strict=True)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True,
                          weight_decay=args.weight_decay)
    per_epoch = (len(train_x) + args.batch_size - 1) // args.batch_size
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.epochs * per_epoch,
                                                pct_start=0.25, cycle_momentum=False)
    trained = torch.compile(model) if args.compile else model
    orders = loader_orders(len(train_x), args.seed)
    print(f"training: {args.epochs} epoch(s) of {per_epoch} steps, batch {args.batch_size}, SGD nesterov momentum 0.9 "
          f"weight decay {args.weight_decay}, OneCycleLR to lr {args.lr}, torch {torch.__version__}", flush=True)
    step, seconds, accuracy = 0, 0.0, 0.0
    for epoch in range(args.epochs):
        order = torch.tensor(next(orders))
        start, loss_sum, steps = time.perf_counter(), 0.0, 0
        for begin in range(0, len(order), args.batch_size):
            if args.max_steps and step >= args.max_steps:
                break
            idx = order[begin:begin + args.batch_size]
            x, y = augment(train_x[idx]), train_y[idx]
            loss = F.cross_entropy(trained(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item()
            steps += 1
            step += 1
        seconds = time.perf_counter() - start
        test_loss, accuracy = evaluate(model, test_x, test_y)
        print(f"epoch {epoch + 1}: train loss {loss_sum / max(steps, 1):.4f}, test loss {test_loss:.4f}, "
              f"test accuracy {accuracy:.2f}%, lr {opt.param_groups[0]['lr']:.4g}, {seconds:.1f} s", flush=True)
        if args.max_steps and step >= args.max_steps:
            break
    print_result("resnet20_epoch", seconds, accuracy, args.compile)


if __name__ == "__main__":
    main()
