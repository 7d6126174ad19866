"""PyTorch twin of tutorials/09_lstm_lm: pytorch/examples' word_language_model on
characters (Embedding(V, 200) -> LSTM(200, 200, 2 layers) -> Linear(200, V), the
example's init_weights, no dropout), truncated BPTT over 64 characters, SGD lr 20
with the gradient norm clipped at 0.25, lr / 4 when the validation loss does not
improve; the same corpus (four files of Debian's fortunes, 90% train, 10%
validation, vocabulary = the sorted bytes). The same seed gives the same initial
weights, so the two programs are the same training in float32. Prints the same
RESULT line ("check": the validation perplexity).

    /usr/bin/python3 bench/lstm_lm_torch.py [--epochs N] [--max-steps N] [--init FILE]
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

CORPUS_FILES = ["wisdom", "literature", "science", "people"]  # tutorials/09_lstm_lm/main.c
EMBED, HIDDEN, LAYERS, BPTT, EVAL_BATCH = 200, 200, 2, 64, 10


class RNNModel(nn.Module):  # the example's, LSTM, no dropout, untied
    def __init__(self, ntoken):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, EMBED)
        self.rnn = nn.LSTM(EMBED, HIDDEN, LAYERS)
        self.decoder = nn.Linear(HIDDEN, ntoken)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden


def batchify(ids, columns):
    rows = len(ids) // columns
    return ids[:rows * columns].view(columns, rows).t().contiguous()


def repackage(hidden):
    return None if hidden is None else tuple(h.detach() for h in hidden)


def evaluate(model, data):
    model.eval()
    total, hidden = 0.0, None
    with torch.no_grad():
        for i in range(0, data.size(0) - 1, BPTT):
            n = min(BPTT, data.size(0) - 1 - i)
            output, hidden = model(data[i:i + n], hidden)
            total += n * F.cross_entropy(output, data[i + 1:i + 1 + n].reshape(-1)).item()
            hidden = repackage(hidden)
    model.train()
    return total / (data.size(0) - 1)


def main():
    p = argparse.ArgumentParser(description="PyTorch twin of tutorials/09_lstm_lm")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=20.0)
    p.add_argument("--clip", type=float, default=0.25)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="/usr/share/games/fortunes")
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--init", help="start from these weights (the tutorial's --save-init safetensors file)")
    args = p.parse_args()

    text = b"".join(open(os.path.join(args.data, name), "rb").read() for name in CORPUS_FILES)
    chars = sorted(set(text))
    index_of = {b: i for i, b in enumerate(chars)}
    ids = torch.tensor([index_of[b] for b in text], dtype=torch.int64)
    train_length = len(ids) * 9 // 10
    train, valid = batchify(ids[:train_length], args.batch_size), batchify(ids[train_length:], EVAL_BATCH)
    print(f"corpus: {len(ids)} characters, vocabulary {len(chars)}")

    torch.manual_seed(args.seed)
    model = RNNModel(len(chars))
    if args.init:
        model.load_state_dict(load_safetensors(args.init), strict=True)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    lr, best, step, seconds, val_loss = args.lr, math.inf, 0, 0.0, 0.0
    for epoch in range(args.epochs):
        if args.max_steps and step >= args.max_steps:
            break
        hidden, loss_sum, steps = None, 0.0, 0
        start = time.perf_counter()
        for i in range(0, train.size(0) - 1, BPTT):
            if args.max_steps and step >= args.max_steps:
                break
            n = min(BPTT, train.size(0) - 1 - i)
            hidden = repackage(hidden)
            opt.zero_grad()
            output, hidden = model(train[i:i + n], hidden)
            loss = F.cross_entropy(output, train[i + 1:i + 1 + n].reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            loss_sum += loss.item()
            steps += 1
            step += 1
        seconds = time.perf_counter() - start
        val_loss = evaluate(model, valid)
        print(f"epoch {epoch + 1}: train loss {loss_sum / max(steps, 1):.4f}, valid loss {val_loss:.4f}, "
              f"valid perplexity {math.exp(val_loss):.3f}, lr {lr:g}, {seconds:.1f} s", flush=True)
        if val_loss < best:
            best = val_loss
        else:
            lr /= 4
            for group in opt.param_groups:
                group["lr"] = lr
    print_result("lstm_lm_epoch", seconds, math.exp(val_loss))


if __name__ == "__main__":
    main()
