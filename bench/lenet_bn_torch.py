"""PyTorch twin of tutorials/04_batchnorm_gpu on the CPU: LeNet with BatchNorm2d after
each convolution, SGD lr 0.01 momentum 0.9, StepLR(1, 0.7), batch 64, one epoch of
Fashion-MNIST in tapegrad's data order (mlp_torch.py has the shared pieces).
Prints the same RESULT line ("impl": "pytorch")."""
import torch
import torch.nn as nn

from mlp_torch import parse_args, run


def make_lenet_bn():
    return nn.Sequential(nn.Conv2d(1, 20, 5), nn.BatchNorm2d(20), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(20, 50, 5), nn.BatchNorm2d(50), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))


if __name__ == "__main__":
    run("lenet_bn_epoch", make_lenet_bn, lambda m, lr: torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9), True,
        parse_args(0.01, "PyTorch twin of tutorials/04_batchnorm_gpu"),
        make_sched=lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7))
