"""Tiny PNG and JPEG files of every color type, and what PIL decodes them to
(Image.open(f).convert("RGB"), torchvision's default loader), for
tests/data/image_folder_test.cc. Writes tests/data/fixtures/images/*.png|*.jpg and
tests/data/fixtures/images.txt ([3, H, W] uint8 per file). Run with /usr/bin/python3
(Debian's PIL, which decodes with the same libpng and libjpeg-turbo)."""
import os
import struct
import sys
import zlib

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
from fixture_io import FixtureWriter  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = os.path.join(HERE, "fixtures", "images")
os.makedirs(DIR, exist_ok=True)
rng = np.random.RandomState(7)  # the files are drawn in this order: keep it
H, W = 5, 7


def rgb():
    return rng.randint(0, 256, (H, W, 3), dtype=np.uint8)


images = {
    "rgb.png": Image.fromarray(rgb(), "RGB"),
    "rgba.png": Image.fromarray(rng.randint(0, 256, (H, W, 4), dtype=np.uint8), "RGBA"),
    "gray.png": Image.fromarray(rng.randint(0, 256, (H, W), dtype=np.uint8), "L"),
    "gray_alpha.png": Image.fromarray(rng.randint(0, 256, (H, W, 2), dtype=np.uint8), "LA"),
    "bilevel.png": Image.fromarray(rng.randint(0, 2, (H, W)).astype(bool)),
    "rgb.jpg": Image.fromarray(rgb(), "RGB"),
    "gray.jpg": Image.fromarray(rng.randint(0, 256, (H, W), dtype=np.uint8), "L"),
}
pal = Image.fromarray(rng.randint(0, 4, (H, W), dtype=np.uint8), "P")
pal.putpalette([10, 20, 30, 200, 100, 50, 0, 255, 0, 90, 90, 90])
pal.info["transparency"] = 1
images["palette_trns.png"] = pal
images["rgb16.png"] = None



def png16_rgb(path):
    """A 16-bit RGB PNG, written by hand (PIL cannot write one; it reads one as 8-bit RGB)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    vals = rng.randint(0, 65536, (H, W, 3)).astype(">u2")
    raw = b"".join(b"\x00" + vals[y].tobytes() for y in range(H))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 16, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


w = FixtureWriter(os.path.join(HERE, "fixtures", "images.txt"))
for name, img in sorted(images.items()):
    path = os.path.join(DIR, name)
    if name.endswith(".jpg"):
        img.save(path, quality=90)
    elif name == "palette_trns.png":
        img.save(path, transparency=1)
    elif img is None:
        png16_rgb(path)
    else:
        img.save(path)
    decoded = np.asarray(Image.open(path).convert("RGB"))
    w.add(name, torch.from_numpy(decoded.copy()).permute(2, 0, 1).contiguous())
w.save()
