/* The lesson's images, all as 32 x 32: Fashion-MNIST padded from 28 x 28 (the
 * default; 1 channel), CIFAR-10's binary files (--data DIR; 3 channels), or generated
 * CIFAR-shaped data (--synthetic; 3 channels). Training images stay uint8 so the
 * loader's transforms augment them per sample (random crop with padding 4, flip,
 * to-tensor, normalise); test images are normalised once, without augmentation. */
#ifndef TUTORIALS_13_RESNET_DATA_H
#define TUTORIALS_13_RESNET_DATA_H

#include "tapegrad.h"
#include "tutorials/common/common.h"

typedef struct {
    tg_tensor *train_x, *train_y; /* [N, C, 32, 32] uint8, [N] int64 (owned) */
    tg_tensor *test_x, *test_y;   /* [M, C, 32, 32] float32 normalised, [M] int64 (owned) */
    int channels;                 /* C: 1 (Fashion-MNIST) or 3 */
    double mean[3], std[3];       /* per-channel statistics of [0, 1] pixels */
    const char *name;
} image_data;

/* --synthetic, else --data DIR as CIFAR-10 binary files, else Fashion-MNIST. */
image_data image_data_load(const tut_args *args);
void image_data_free(image_data *d);

/* torchvision's CIFAR recipe: RandomCrop(32, padding=4), RandomHorizontalFlip(),
 * ToTensor(), Normalize(mean, std). With normalize false only the two random steps
 * (uint8 in, uint8 out: what the sample grid shows). */
tg_compose image_data_augmentation(const image_data *d, bool normalize);

#endif
