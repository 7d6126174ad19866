"""Twin of bench/resnet.c: one ResNet-20 training step at batch 128 on CIFAR-shaped
data (x [128, 3, 32, 32] ~ N(0, 1), 10 classes): forward, cross entropy, backward,
SGD lr 0.1 Nesterov momentum 0.9 weight decay 5e-4; the median of REPS steps after
WARMUP. The model is written out here (no torchvision), in the order and with the
names of tutorials/13_resnet/resnet.c, so the same seed gives the same weights and
data and "check" (the first step's loss) agrees with tapegrad's.

    /usr/bin/python3 bench/resnet_torch.py              # Debian's PyTorch 1.13: eager
    $(bench/peers/setup.sh) bench/resnet_torch.py       # PyTorch 2: eager, then torch.compile

Under PyTorch 2 a second RESULT line times the torch.compile'd model ("pytorch2-compile");
its compilation happens in the warm-up steps, which are not timed.
"""
import json
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from twin_impl import impl_name

torch.set_num_threads(2)
BATCH, WARMUP, REPS = 128, 2, 10


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:  # option B: 1x1 conv + BN
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    def __init__(self, in_channels, num_classes, widths, blocks):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        for i, (width, count) in enumerate(zip(widths, blocks)):
            cin = widths[i - 1] if i else widths[0]
            layer = nn.Sequential(*[BasicBlock(cin if j == 0 else width, width, (2 if i else 1) if j == 0 else 1)
                                    for j in range(count)])
            setattr(self, f"layer{i + 1}", layer)
        self.stages = len(widths)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[-1], num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for i in range(self.stages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet20(in_channels=3, num_classes=10):
    return ResNet(in_channels, num_classes, [16, 32, 64], [3, 3, 3])


def time_steps(compiled):
    torch.manual_seed(0)
    model = resnet20()
    x = torch.randn(BATCH, 3, 32, 32)
    y = torch.randint(0, 10, (BATCH,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    forward = torch.compile(model) if compiled else model
    times, first_loss = [], None
    for r in range(WARMUP + REPS):
        start = time.perf_counter()
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()
        if r == 0:
            first_loss = value
        if r >= WARMUP:
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print("RESULT " + json.dumps({"bench": "resnet20_train_step", "impl": impl_name(compiled), "seconds": median,
                                  "unit_value": median * 1e3, "unit": "ms", "check": round(first_loss, 3),
                                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}),
          flush=True)


if __name__ == "__main__":
    time_steps(False)
    if int(torch.__version__.split(".")[0]) >= 2:
        time_steps(True)
