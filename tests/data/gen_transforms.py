"""torchvision's RandomCrop / RandomHorizontalFlip / ToTensor / Normalize from the same
seed, for tests/data/transforms_test.cc (data/transforms.h). Writes
tests/data/fixtures/transforms.txt; run with /usr/bin/python3 (Debian's PyTorch 1.13).

torchvision is not installed here, so its semantics are reproduced in plain torch,
function by function, from torchvision 0.14 (torchvision/transforms/transforms.py and
functional_tensor.py, the tensor code paths):
- RandomCrop.forward: `if self.padding is not None: img = F.pad(img, self.padding,
  self.fill, self.padding_mode)`, then `i, j, h, w = self.get_params(img, self.size)`,
  `return F.crop(img, i, j, h, w)`.
- RandomCrop.get_params: `if h < th or w < tw: raise ValueError`; `if w == tw and h == th:
  return 0, 0, h, w` (nothing drawn); `i = torch.randint(0, h - th + 1, size=(1,)).item()`;
  `j = torch.randint(0, w - tw + 1, size=(1,)).item()`.
- functional_tensor.pad: padding (left, top, right, bottom) -> torch.nn.functional.pad
  with [left, right, top, bottom]; "edge" is "replicate"; reflect/replicate pad a
  float32 copy of a uint8 image (need_cast) in 4-D (need_squeeze) and cast back;
  "symmetric" is _pad_symmetric (indices mirrored with the edge repeated).
- RandomHorizontalFlip.forward: `if torch.rand(1) < self.p: return F.hflip(img)`;
  hflip is img.flip(-1).
- functional.to_tensor (a PIL image; here the uint8 CHW tensor it would make):
  `img.to(dtype=torch.float32).div(255)`.
- functional_tensor.normalize: `mean = torch.as_tensor(mean, dtype=tensor.dtype)`,
  likewise std, `tensor.sub_(mean.view(-1, 1, 1)).div_(std.view(-1, 1, 1))`.
Compose applies them in order, so the numbers are drawn crop (i, j) then flip, per image.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
from fixture_io import FixtureWriter  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "transforms.txt")


def pad(img, padding, fill, mode):
    left, top, right, bottom = padding
    if mode == "constant":
        return torch.nn.functional.pad(img, [left, right, top, bottom], mode="constant", value=fill)
    if mode == "symmetric":
        h, w = img.shape[-2:]
        rows = [(-r - 1) if r < 0 else (2 * h - 1 - r) if r >= h else r for r in range(-top, h + bottom)]
        cols = [(-c - 1) if c < 0 else (2 * w - 1 - c) if c >= w else c for c in range(-left, w + right)]
        return img[..., rows, :][..., cols]
    torch_mode = {"edge": "replicate", "reflect": "reflect"}[mode]
    out = torch.nn.functional.pad(img.to(torch.float32).unsqueeze(0), [left, right, top, bottom], mode=torch_mode)
    return out.squeeze(0).to(img.dtype)


def random_crop(img, size, padding, mode, fill=0):
    if padding is not None:
        img = pad(img, padding, fill, mode)
    h, w = img.shape[-2:]
    th, tw = size
    if h < th or w < tw:
        raise ValueError("crop larger than image")
    if w == tw and h == th:
        return img
    i = torch.randint(0, h - th + 1, size=(1,)).item()
    j = torch.randint(0, w - tw + 1, size=(1,)).item()
    return img[..., i:i + th, j:j + tw]


def random_hflip(img, p=0.5):
    if torch.rand(1) < p:
        return img.flip(-1)
    return img


def to_tensor(img):
    return img.to(dtype=torch.float32).div(255)


def normalize(t, mean, std):
    mean = torch.as_tensor(mean, dtype=t.dtype).view(-1, 1, 1)
    std = torch.as_tensor(std, dtype=t.dtype).view(-1, 1, 1)
    return t.clone().sub_(mean).div_(std)


MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)

w = FixtureWriter(OUT)
gen = torch.Generator().manual_seed(123)
images = torch.randint(0, 256, (6, 3, 8, 10), generator=gen, dtype=torch.uint8)
w.add("images", images)

# name, seed, crop size, padding (l, t, r, b), mode, flip p, to_tensor + normalize
CASES = [
    ("cifar_zero", 0, (8, 10), (2, 2, 2, 2), "constant", 0.5, True),
    ("cifar_reflect", 1, (8, 10), (3, 3, 3, 3), "reflect", 0.5, True),
    ("edge_rect", 2, (5, 7), (1, 2, 3, 4), "edge", 0.5, False),
    ("symmetric", 3, (9, 9), (2, 1, 0, 3), "symmetric", 0.3, False),
    ("no_draw_crop", 4, (8, 10), None, "constant", 0.5, False),  # same size: get_params draws nothing
]
for name, seed, size, padding, mode, p, float_out in CASES:
    torch.manual_seed(seed)
    outs = []
    for img in images:
        x = random_hflip(random_crop(img, size, padding, mode), p)
        if float_out:
            x = normalize(to_tensor(x), MEAN, STD)
        outs.append(x)
    w.add(name, torch.stack(outs))
    w.add(name + "_next_word", torch.randint(0, 2**31 - 1, (1,)))  # where the generator is after the batch

torch.manual_seed(5)
w.add("to_tensor_all_bytes", to_tensor(torch.arange(256, dtype=torch.uint8).view(1, 16, 16)))
w.save()
