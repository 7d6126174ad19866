"""How much one epoch of the 02_mlp recipe depends on the seed, in PyTorch itself.

The MLP 784-1024-512-256-128-10 with ReLU, Adam lr 1e-3, batch 64, one epoch of
Fashion-MNIST, written the usual PyTorch way: torch.manual_seed(seed), PyTorch's
own initialisation and DataLoader(shuffle=True). Prints the test accuracy per seed
(tutorials/02_mlp/README.md quotes seeds 0..7). Not a benchmark: no timing.

    /usr/bin/python3 bench/mlp_seed_spread_torch.py 0 1 2 3 4 5 6 7
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from mlp_torch import evaluate, load_fashion

torch.set_num_threads(2)
train_x, train_y, test_x, test_y = load_fashion()
for seed in [int(a) for a in sys.argv[1:]] or [1]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(),
                          nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(train_x, train_y), batch_size=64, shuffle=True)
    for xb, yb in data:
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"seed {seed}: test accuracy {evaluate(model, test_x, test_y):.2f}%", flush=True)
