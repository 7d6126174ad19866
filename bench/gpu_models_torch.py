"""PyTorch twin of bench/gpu_models.c: the training steps of lesson 13's ResNet-20
(batch 128) and ResNet-18 (batch 256), and lesson 10's GPT at GPT-2 small's shape
(12 layers, 12 heads, 768 wide, context 1024, batch 8, vocabulary 50304), each in
float32 and under torch.autocast bfloat16, with the same optimizers (SGD Nesterov for
the ResNets; AdamW with decay on the matrices and clipping at 1.0 for the GPT). The
models are bench/resnet_torch.py's and bench/gpt_torch.py's (no torchvision).

    python3 bench/gpu_models_torch.py [--mode eager|compile|reduce-overhead]
                                      [--only resnet20|resnet18|gpt2] [--device cpu]
                                      [--smoke] [--peak-tflops X]

--mode compile trains through torch.compile (its compilation in the warm-up steps,
not timed), reduce-overhead through torch.compile(mode="reduce-overhead") (CUDA
graphs). The bf16 ResNet runs are channels_last, as PyTorch's AMP guide tells its
users; the float32 ones NCHW. --smoke: toy sizes and one timed step (batch 4, GPT
2 x 2 x 64, context 64, vocabulary 96), to try the script without a GPU. Prints
RESULT lines with gpu_models.c's names; impl "torch", "torch-compile" or
"torch-reduce-overhead"."""
import argparse
import json
import resource
import statistics
import time

import torch
import torch.nn.functional as F

from gpt_torch import GPT
from resnet_torch import ResNet, resnet20

WARMUP, REPS = 3, 10


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def adamw_decay_groups(model, lr, betas, weight_decay, device):
    """nanoGPT's configure_optimizers: weight decay on the matrices, none on biases and norms."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    extra = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=lr, betas=betas, **extra)


def run(name, model, opt, x, y, amp, args, device, gpt=False, flops_per_step=0.0, tokens=0):
    name = name + ("_amp_bf16" if amp else "")
    forward = model if args.mode == "eager" else torch.compile(
        model, mode="reduce-overhead" if args.mode == "reduce-overhead" else None)
    reps = 1 if args.smoke else REPS
    times, loss = [], None
    for r in range(WARMUP + reps):
        sync(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            out = forward(x)
            if gpt:
                out = out.view(-1, out.size(-1))
            loss = F.cross_entropy(out, y.view(-1) if gpt else y)
        loss.backward()
        if gpt:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        if r >= WARMUP:
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    line = {"bench": name, "impl": "torch" if args.mode == "eager" else "torch-" + args.mode,
            "seconds": median, "unit_value": round(median * 1e3, 4), "unit": "ms/step",
            "loss": round(loss.item(), 4)}
    if gpt:
        line["tokens_per_s"] = round(tokens / median)
        if args.peak_tflops > 0:
            line["mfu"] = round(flops_per_step / median / (args.peak_tflops * 1e12), 3)
    line["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print("RESULT " + json.dumps(line), flush=True)


def bench_resnet(which, args, device):
    batch = 4 if args.smoke else (256 if which == "resnet18" else 128)
    name = "%s_step_%d" % (which, batch)
    for amp in (False, True):
        torch.manual_seed(0)
        model = resnet20(3, 10) if which == "resnet20" else ResNet(3, 10, [64, 128, 256, 512], [2, 2, 2, 2])
        fmt = torch.channels_last if amp else torch.contiguous_format
        model = model.to(device, memory_format=fmt)
        x = torch.randn(batch, 3, 32, 32, device=device).contiguous(memory_format=fmt)
        y = torch.randint(0, 10, (batch,), device=device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
        run(name, model, opt, x, y, amp, args, device)


def bench_gpt(args, device):
    vocab, n_layer, n_head, n_embd, block, batch = 50304, 12, 12, 768, 1024, 8
    if args.smoke:
        vocab, n_layer, n_head, n_embd, block, batch = 96, 2, 2, 64, 64, 4
    name = "gpt2_step_%dx%d" % (batch, block)
    for amp in (False, True):
        torch.manual_seed(0)
        model = GPT(vocab, n_layer, n_head, n_embd, block).to(device)
        n_params = sum(p.numel() for p in model.parameters()) - block * n_embd  # less wpe
        flops = (6 * n_params + 12 * n_layer * block * n_embd) * batch * block
        x = torch.randint(0, vocab, (batch, block), device=device)
        y = torch.randint(0, vocab, (batch, block), device=device)
        opt = adamw_decay_groups(model, 6e-4, (0.9, 0.95), 0.1, device)
        run(name, model, opt, x, y, amp, args, device, gpt=True, flops_per_step=flops, tokens=batch * block)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["eager", "compile", "reduce-overhead"], default="eager")
    p.add_argument("--only", choices=["resnet20", "resnet18", "gpt2"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--peak-tflops", type=float, default=0.0)
    args = p.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("SKIPPED gpu_models_torch: no CUDA device")
        return
    if args.mode != "eager" and not hasattr(torch, "compile"):
        print("SKIPPED gpu_models_torch --mode %s: torch %s has no torch.compile" % (args.mode, torch.__version__))
        return
    torch.backends.cudnn.benchmark = True  # what PyTorch's ResNet users set
    print("# torch %s, %s" % (torch.__version__,
                              torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"), flush=True)
    for which in ("resnet20", "resnet18"):
        if args.only in (None, which):
            bench_resnet(which, args, device)
    if args.only in (None, "gpt2"):
        bench_gpt(args, device)


if __name__ == "__main__":
    main()
