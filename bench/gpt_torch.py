"""PyTorch twin of tutorials/10_gpt: nanoGPT's model.py (GPT, Block, CausalSelfAttention
with one qkv Linear, MLP with tanh GELU, the head tied to the token embedding, no
dropout) and train.py's loop (random windows from torch.randint, estimate_loss every
--eval-interval steps, AdamW with decay on the 2-D weights only, betas (0.9, 0.99),
LinearLR warmup then CosineAnnealingLR down to lr / 10 in a SequentialLR, gradient
norm clipped at 1.0). It starts from the lesson's weights (--init: the lesson's
--save-init file) and draws the same windows: like the lesson it seeds the generator
with --seed after making the model, and makes the same torch.randint calls in the same
order. Prints the same lines and RESULT ("check": the last validation loss).

    bazel-bin/tutorials/10_gpt/10_gpt --max-steps 50 --save-init gpt_init.safetensors
    /usr/bin/python3 bench/gpt_torch.py --max-steps 50 --init gpt_init.safetensors
    $(bench/peers/setup.sh) bench/gpt_torch.py --compile ...   # PyTorch 2, torch.compile

With --compile (PyTorch 2) the model runs through torch.compile; it is compiled before
the clock by one forward and backward of a fixed batch (no window drawn, no optimizer
step, the gradients dropped), so the step time is the compiled program's, not the
compiler's (the compile time is printed).

Attention: F.scaled_dot_product_attention(is_causal=True) where PyTorch has it (2.0+),
else the composed formula (PyTorch 1.13, Debian's): softmax(q k^T / sqrt(hs) + causal
mask) v.
"""
import argparse
import math
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

from mlp_torch import load_safetensors, print_result

torch.set_num_threads(2)

FORTUNE_FILES = ["wisdom", "literature", "science", "people"]  # tutorials/10_gpt/corpus.c


def causal_attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.size(-2)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    return F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = causal_attention(q, k, v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, n_layer, n_head, n_embd, block_size):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd)))
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx):
        T = idx.size(1)
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def load_ids(path, synthetic, seed):
    if synthetic:  # corpus.c: 65536 uniform ids of 96, drawn right after the seed
        torch.manual_seed(seed)
        return torch.randint(0, 96, (65536,)), 96
    if os.path.isdir(path):
        text = b"".join(open(os.path.join(path, name), "rb").read() for name in FORTUNE_FILES)
    else:
        text = open(path, "rb").read()
    chars = sorted(set(text))
    index_of = {b: i for i, b in enumerate(chars)}
    return torch.tensor([index_of[b] for b in text], dtype=torch.int64), len(chars)


def get_batch(data, batch_size, block):
    ix = torch.randint(len(data) - block, (batch_size,))
    x = torch.stack([data[i:i + block] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block] for i in ix])
    return x, y


def main():
    p = argparse.ArgumentParser(description="PyTorch twin of tutorials/10_gpt")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--max-steps", type=int, default=2000)
    p.add_argument("--eval-interval", type=int, default=100)
    p.add_argument("--eval-iters", type=int, default=20)
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--data", default="/usr/share/games/fortunes")
    p.add_argument("--synthetic", action="store_true")
    p.add_argument("--amp", choices=["bf16"], help="CPU autocast to bfloat16")
    p.add_argument("--init", help="start from these weights (the lesson's --save-init safetensors file)")
    p.add_argument("--compile", action="store_true", help="train through torch.compile (PyTorch 2)")
    p.add_argument("--flush-denormal", action="store_true",
                   help="torch.set_flush_denormal(True) (the lesson's --flush-denormal)")
    args = p.parse_args()
    if args.flush_denormal and not torch.set_flush_denormal(True):
        raise SystemExit("torch.set_flush_denormal is not supported on this CPU")

    ids, vocab = load_ids(args.data, args.synthetic, args.seed)
    n = len(ids) * 9 // 10
    train, val = ids[:n], ids[n:]
    print(f"corpus: {len(ids)} characters ({len(train)} train, {len(val)} validation), vocabulary {vocab}")
    torch.manual_seed(args.seed)
    model = GPT(vocab, args.n_layer, args.n_head, args.n_embd, args.block_size)
    if args.init:
        model.load_state_dict(load_safetensors(args.init), strict=True)
    print(f"model: GPT, {sum(p.numel() for p in model.parameters())} parameters, attention "
          f"{'F.scaled_dot_product_attention' if hasattr(F, 'scaled_dot_product_attention') else 'composed'}")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": args.weight_decay},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.99))
    warmup = args.warmup_steps if args.warmup_steps < args.max_steps else args.max_steps // 10
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.max_steps - warmup, args.lr / 10)
    if warmup > 0:
        linear = torch.optim.lr_scheduler.LinearLR(opt, 1.0 / (warmup + 1), 1.0, warmup)
        sched = torch.optim.lr_scheduler.SequentialLR(opt, [linear, cosine], [warmup])
    else:
        sched = cosine
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp == "bf16")

    forward = torch.compile(model) if args.compile else model

    def loss_of(x, y):
        with autocast:
            logits = forward(x)
            return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

    @torch.no_grad()
    def estimate_loss(data):
        model.eval()
        total = sum(loss_of(*get_batch(data, args.batch_size, args.block_size)).item() for _ in range(args.eval_iters))
        model.train()
        return total / args.eval_iters

    if args.compile:  # compile forward and backward before the clock, leaving the weights as they are
        start = time.perf_counter()
        x = train[:args.batch_size * args.block_size + 1]
        loss_of(x[:-1].view(args.batch_size, -1), x[1:].view(args.batch_size, -1)).backward()
        opt.zero_grad(set_to_none=True)
        print(f"compile: {time.perf_counter() - start:.1f} s (not timed)")

    torch.manual_seed(args.seed)  # the lesson's batches start from the seed afresh
    train_seconds, val_loss = 0.0, float("nan")
    for step in range(args.max_steps + 1):
        if step % args.eval_interval == 0 or step == args.max_steps:
            train_estimate = estimate_loss(train)
            val_loss = estimate_loss(val)
            print(f"step {step}: train loss {train_estimate:.4f}, val loss {val_loss:.4f}", flush=True)
        if step == args.max_steps:
            break
        start, lr = time.perf_counter(), opt.param_groups[0]["lr"]
        x, y = get_batch(train, args.batch_size, args.block_size)
        loss = loss_of(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        value = loss.item()
        seconds = time.perf_counter() - start
        train_seconds += seconds
        if (step + 1) % args.log_interval == 0:
            print(f"iter {step + 1}: loss {value:.4f}, lr {lr:.3e}, {seconds * 1000:.0f} ms", flush=True)
    step_seconds = train_seconds / args.max_steps
    print(f"training: {args.max_steps} steps in {train_seconds:.1f} s, {step_seconds * 1000:.0f} ms/step, "
          f"{args.batch_size * args.block_size / step_seconds:.0f} tokens/s")
    print_result("gpt_step", step_seconds, val_loss, args.compile)


if __name__ == "__main__":
    main()
