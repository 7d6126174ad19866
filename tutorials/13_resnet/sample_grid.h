/* A PNG of what the augmentation does: one training image per row, the image itself
 * in the first column and random augmentations of it in the others. */
#ifndef TUTORIALS_13_RESNET_SAMPLE_GRID_H
#define TUTORIALS_13_RESNET_SAMPLE_GRID_H

#include <stdint.h>

#include "tapegrad.h"

/* images: uint8 [N, C, H, W] on the CPU, C 1 (gray PNG) or 3 (RGB); rows <= N.
 * augment maps a uint8 [C, H, W] image to one of the same shape. Draws from a
 * generator of its own seeded `seed`, so training's random numbers are untouched.
 * Cells are 2 pixels apart on white, so a crop's black border shows. Returns 0, or -1
 * after printing why. */
int save_augmentation_grid(const char *path, tg_tensor *images, const tg_compose *augment, int rows, int cols,
                           uint64_t seed);

#endif
