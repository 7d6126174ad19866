"""PyTorch twin of tutorials/07_vae: pytorch/examples' VAE (784-400-20 encoder with mu
and logvar, reparameterisation, 20-400-784 decoder with sigmoid; loss = binary cross
entropy summed + KL divergence), Adam lr 1e-3, batch 128, Fashion-MNIST pixels in
[0, 1]. The same seed gives both programs the same initial weights, the same data
order (tapegrad's loader is DataLoader with its own generator) and the same eps
draws (the default generator is reseeded after the model is made, as the tutorial
does after its tg_module_print). Prints the same RESULT line ("check": the test loss).

    /usr/bin/python3 bench/vae_torch.py [--epochs N] [--max-steps N] [--init FILE]
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

from mlp_torch import FASHION_DIR, find, load_safetensors, loader_orders, print_result, read_idx

torch.set_num_threads(2)


class VAE(nn.Module):  # pytorch/examples vae/main.py
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def load_pixels(directory):
    """(train_x, test_x): float32 [N, 784], bytes / 255 (torchvision's ToTensor)."""
    return [(read_idx(find(directory, f"{split}-images-idx3-ubyte")).float() / 255).reshape(-1, 784).contiguous()
            for split in ("train", "t10k")]


def main():
    p = argparse.ArgumentParser(description="PyTorch twin of tutorials/07_vae")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=FASHION_DIR)
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--init", help="start from these weights (the tutorial's --save-init safetensors file)")
    args = p.parse_args()

    train_x, test_x = load_pixels(args.data)
    torch.manual_seed(args.seed)
    model = VAE()
    if args.init:
        model.load_state_dict(load_safetensors(args.init), strict=True)
    torch.manual_seed(args.seed)  # the eps draws start afresh, as in the tutorial
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    orders = loader_orders(len(train_x), args.seed)
    step, seconds, test_loss = 0, 0.0, 0.0
    for epoch in range(args.epochs):
        if args.max_steps and step >= args.max_steps:
            break
        order = torch.tensor(next(orders))
        model.train()
        loss_sum, images = 0.0, 0
        start = time.perf_counter()
        for begin in range(0, len(order), args.batch_size):
            if args.max_steps and step >= args.max_steps:
                break
            x = train_x[order[begin:begin + args.batch_size]]
            opt.zero_grad()
            recon, mu, logvar = model(x)
            loss = loss_function(recon, x, mu, logvar)
            loss.backward()
            opt.step()
            loss_sum += loss.item()
            images += len(x)
            step += 1
        seconds = time.perf_counter() - start
        model.eval()
        test_sum = 0.0
        # iterating the example's test DataLoader (no generator) first draws the workers'
        # base seed from the default generator, as tapegrad's unshuffled loader does
        torch.empty((), dtype=torch.int64).random_()
        with torch.no_grad():
            for begin in range(0, len(test_x), args.batch_size):
                x = test_x[begin:begin + args.batch_size]
                recon, mu, logvar = model(x)
                test_sum += loss_function(recon, x, mu, logvar).item()
        test_loss = test_sum / len(test_x)
        print(f"epoch {epoch + 1}: train loss {loss_sum / max(images, 1):.4f}, test loss {test_loss:.4f}, "
              f"{seconds:.1f} s", flush=True)
    print_result("vae_epoch", seconds, test_loss)


if __name__ == "__main__":
    main()
