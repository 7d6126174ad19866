/* Image transforms as values (torchvision.transforms): RandomCrop with padding,
 * RandomHorizontalFlip, ToTensor and Normalize, composed like transforms.Compose.
 *
 *     tg_transform steps[] = {
 *         tg_transform_random_crop(32, 4, TG_CROP_PAD_CONSTANT),   // RandomCrop(32, padding=4)
 *         tg_transform_random_horizontal_flip(0.5),           // RandomHorizontalFlip()
 *         tg_transform_to_tensor(),                           // ToTensor(): uint8 -> float32 / 255
 *         tg_transform_normalize(3, (double[])TG_CIFAR10_MEAN, (double[])TG_CIFAR10_STD),
 *     };
 *     tg_compose augment = tg_compose_of(4, steps);            // a value: copy it freely
 *     tg_tensor *x = tg_compose_apply(&augment, image, NULL);  // [3, 32, 32] uint8 -> float32
 *
 * A transform is a plain struct and a composition holds copies of its steps: nothing
 * to free, and a loader keeps its own copy (tg_loader_opts.transform).
 *
 * Random numbers: drawn from `gen`, or from the default CPU generator (core/rng.h,
 * seeded by tg_manual_seed) when gen is NULL, in torchvision's order: RandomCrop
 * draws torch.randint(0, h - th + 1, (1,)) then torch.randint(0, w - tw + 1, (1,))
 * (nothing when the padded image already has the crop's size), RandomHorizontalFlip
 * torch.rand(1) and flips when it is < p. So after tg_manual_seed(s) the results are
 * torchvision's after torch.manual_seed(s), bit for bit (tests/data/transforms_test.cc
 * against fixtures from tests/data/gen_transforms.py).
 *
 * Images are CPU tensors [C, H, W] or [H, W] (crop and flip: any dtype; to-tensor:
 * uint8; normalize: float32 or float64). Results are NEW references owned by the
 * innermost open scope, else by the caller; the input is never changed. Errors (bad
 * parameters, an image smaller than the crop, reflect padding as wide as the image)
 * return NULL and name the transform and the shapes. */
#ifndef TG_DATA_TRANSFORMS_H
#define TG_DATA_TRANSFORMS_H

#include <stdint.h>

#include "core/rng.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { TG_TRANSFORM_MAX_CHANNELS = 4, TG_COMPOSE_MAX = 8 };

/* torchvision's padding_mode: constant (the fill value), edge (repeat the last
 * pixel), reflect (mirror without repeating the edge: 2 1 | 0 1 2), symmetric (with:
 * 1 0 | 0 1 2). */
typedef enum {
    TG_CROP_PAD_CONSTANT = 0,
    TG_CROP_PAD_EDGE,
    TG_CROP_PAD_REFLECT,
    TG_CROP_PAD_SYMMETRIC
} tg_crop_padding_mode;

typedef enum {
    TG_TRANSFORM_RANDOM_CROP = 1,
    TG_TRANSFORM_RANDOM_HORIZONTAL_FLIP,
    TG_TRANSFORM_TO_TENSOR,
    TG_TRANSFORM_NORMALIZE,
} tg_transform_kind;

typedef struct {
    tg_transform_kind kind;
    int64_t size[2];    /* random crop: output height, width */
    int64_t padding[4]; /* random crop: left, top, right, bottom (torchvision's 4-tuple order) */
    tg_crop_padding_mode padding_mode;
    double fill;  /* constant padding's value (torchvision's fill; 0) */
    double p;     /* horizontal flip: probability */
    int channels; /* normalize: entries of mean and std (1: every channel) */
    double mean[TG_TRANSFORM_MAX_CHANNELS], std[TG_TRANSFORM_MAX_CHANNELS];
} tg_transform;

/* RandomCrop(size, padding, padding_mode=mode): a size x size crop after padding every
 * side by `padding`. For other shapes set .size and .padding of the result. */
tg_transform tg_transform_random_crop(int64_t size, int64_t padding, tg_crop_padding_mode mode);
/* RandomHorizontalFlip(p). */
tg_transform tg_transform_random_horizontal_flip(double p);
/* ToTensor() of a uint8 image: float32 values / 255. (Already CHW here.) */
tg_transform tg_transform_to_tensor(void);
/* Normalize(mean, std): (x - mean[c]) / std[c] per channel, in the image's dtype.
 * channels (1..TG_TRANSFORM_MAX_CHANNELS) values are read from mean and std. */
tg_transform tg_transform_normalize(int channels, const double *mean, const double *std);

/* transforms.Compose: up to TG_COMPOSE_MAX steps, applied in order. */
typedef struct {
    int count; /* -1: tg_compose_of was given too many steps (tg_compose_apply says so) */
    tg_transform steps[TG_COMPOSE_MAX];
} tg_compose;
tg_compose tg_compose_of(int count, const tg_transform *steps);

/* One transform / a composition applied to img (see above for gen and ownership). A
 * composition of 0 steps returns a new reference to img itself. */
tg_tensor *tg_transform_apply(const tg_transform *t, tg_tensor *img, tg_mt19937 *gen);
tg_tensor *tg_compose_apply(const tg_compose *c, tg_tensor *img, tg_mt19937 *gen);

#ifdef __cplusplus
}
#endif
#endif
