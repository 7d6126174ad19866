"""PyTorch twin of tutorials/08_dcgan: pytorch/examples' dcgan sized for 28 x 28
Fashion-MNIST (generator ConvTranspose2d 100->128 (7) ->64 (4, 2, 1) ->1 (4, 2, 1)
with BatchNorm + ReLU and tanh; discriminator Conv2d 1->64->128 (4, 2, 1) ->1 (7) with
LeakyReLU(0.2), BatchNorm and sigmoid; no biases; the example's weights_init), BCE
losses, Adam lr 2e-4 betas 0.5/0.999, batch 128, pixels scaled to [-1, 1]. The same
seed gives the same initial weights, fixed noise, data order and noise draws as
the tutorial. Prints the same loss lines, writes the sample grid as PNG
(torchvision's save_image when it is installed) and the same RESULT line
("check": the last Loss_G).

    /usr/bin/python3 bench/dcgan_torch.py [--epochs N] [--max-steps N] [--png FILE]
"""
import argparse
import time

import torch
import torch.nn as nn

from mlp_torch import FASHION_DIR, find, loader_orders, print_result, read_idx

torch.set_num_threads(2)
NZ, NGF, NDF = 100, 64, 64


def generator():
    return nn.Sequential(
        nn.ConvTranspose2d(NZ, NGF * 2, 7, 1, 0, bias=False), nn.BatchNorm2d(NGF * 2), nn.ReLU(True),
        nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF), nn.ReLU(True),
        nn.ConvTranspose2d(NGF, 1, 4, 2, 1, bias=False), nn.Tanh())


def discriminator():
    return nn.Sequential(
        nn.Conv2d(1, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(NDF * 2, 1, 7, 1, 0, bias=False), nn.Sigmoid())


def weights_init(m):  # the example's
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


def save_grid(images, path):
    try:
        import torchvision.utils as vutils
        vutils.save_image(images, path, normalize=True, value_range=(-1, 1), nrow=8)
        print(f"samples: {path}")
    except ImportError:
        print("samples: not written (no torchvision)")


def main():
    p = argparse.ArgumentParser(description="PyTorch twin of tutorials/08_dcgan")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=FASHION_DIR)
    p.add_argument("--max-steps", type=int, default=0)
    p.add_argument("--png", default="dcgan_08_torch.png")
    args = p.parse_args()

    images = read_idx(find(args.data, "train-images-idx3-ubyte"))
    train_x = ((images.float() / 255 - 0.5) / 0.5).reshape(-1, 1, 28, 28).contiguous()

    torch.manual_seed(args.seed)
    netG = generator()
    netG.apply(weights_init)
    netD = discriminator()
    netD.apply(weights_init)
    fixed_noise = torch.randn(64, NZ, 1, 1)
    criterion = nn.BCELoss()
    optD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(0.5, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(0.5, 0.999))

    orders = loader_orders(len(train_x), args.seed)
    step, seconds, loss_g = 0, 0.0, 0.0
    for epoch in range(args.epochs):
        if args.max_steps and step >= args.max_steps:
            break
        order = torch.tensor(next(orders))
        batches = (len(order) + args.batch_size - 1) // args.batch_size
        start, in_epoch = time.perf_counter(), 0
        for begin in range(0, len(order), args.batch_size):
            if args.max_steps and step >= args.max_steps:
                break
            real = train_x[order[begin:begin + args.batch_size]]
            b = real.size(0)
            netD.zero_grad()
            output = netD(real).view(-1)
            err_real = criterion(output, torch.full((b,), 1.0))
            err_real.backward()
            d_x = output.mean().item()
            noise = torch.randn(b, NZ, 1, 1)
            fake = netG(noise)
            output = netD(fake.detach()).view(-1)
            err_fake = criterion(output, torch.full((b,), 0.0))
            err_fake.backward()
            d_g_z1 = output.mean().item()
            optD.step()
            netG.zero_grad()
            output = netD(fake).view(-1)
            err_g = criterion(output, torch.full((b,), 1.0))
            err_g.backward()
            d_g_z2 = output.mean().item()
            optG.step()
            loss_d, loss_g = err_real.item() + err_fake.item(), err_g.item()
            if in_epoch % 50 == 0 or in_epoch == batches - 1 or (args.max_steps and step == args.max_steps - 1):
                print(f"[{epoch + 1}/{args.epochs}][{in_epoch}/{batches}] Loss_D: {loss_d:.4f} Loss_G: {loss_g:.4f} "
                      f"D(x): {d_x:.4f} D(G(z)): {d_g_z1:.4f} / {d_g_z2:.4f}", flush=True)
            in_epoch += 1
            step += 1
        seconds = time.perf_counter() - start
        print(f"epoch {epoch + 1}: Loss_D {loss_d:.4f}, Loss_G {loss_g:.4f}, {in_epoch} steps, {seconds:.1f} s")
    with torch.no_grad():
        save_grid(netG(fixed_noise), args.png)
    print_result("dcgan_epoch", seconds, loss_g)


if __name__ == "__main__":
    main()
