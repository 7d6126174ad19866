"""PyTorch twin of tutorials/03_lenet: LeNet (conv 1->20 5x5, ReLU, max-pool 2, conv
20->50 5x5, ReLU, max-pool 2, fc 800->500, ReLU, fc 500->10), SGD lr 0.01 momentum
0.9, batch 64, one epoch of Fashion-MNIST in tapegrad's data order (mlp_torch.py
has the shared pieces). Prints the same RESULT line ("impl": "pytorch")."""
import torch
import torch.nn as nn

from mlp_torch import parse_args, run


def make_lenet():
    return nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))


if __name__ == "__main__":
    run("lenet_epoch", make_lenet, lambda m, lr: torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9), True,
        parse_args(0.01, "PyTorch twin of tutorials/03_lenet"))
