/* ResNets for 32 x 32 images, built from user modules (nn/module.h):
 * - ResNet-20 (He et al. 2016, section 4.2): a 3x3 conv to 16 channels, three stages
 *   of three BasicBlocks (16, 32, 64 channels), global average pool, Linear 64 -> 10.
 * - ResNet-18 (torchvision's resnet18) with the 3x3 stride-1 stem and no max-pool
 *   that 32 x 32 inputs want: four stages of two BasicBlocks (64 ... 512 channels).
 * Where a block changes the resolution or the width its shortcut is a 1x1 conv + BN
 * (the paper's option B). Names follow torchvision (conv1, bn1, layer1.0.conv1, ...,
 * layer2.0.downsample.0, fc), so a state dict loads into the PyTorch twin. Every
 * layer keeps PyTorch's default init (Conv2d / Linear: kaiming_uniform_(a=sqrt(5));
 * BN: weight 1, bias 0), drawn from the default generator in construction order. */
#ifndef TUTORIALS_13_RESNET_RESNET_H
#define TUTORIALS_13_RESNET_RESNET_H

#include "tapegrad.h"

/* He et al.'s CIFAR ResNet-20 (0.27 M parameters); in_channels 1 or 3. */
tg_module *resnet20(int in_channels, int num_classes);
/* torchvision's ResNet-18 for 32 x 32 inputs (11.2 M parameters). */
tg_module *resnet18_cifar(int in_channels, int num_classes);

#endif
