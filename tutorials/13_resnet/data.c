/* Loading and preparing the lesson's images (data.h). */
#include "tutorials/13_resnet/data.h"

#include <string.h>

enum { SYNTHETIC_TRAIN = 1024, SYNTHETIC_TEST = 512 };

/* Class k is a fixed random image P_k plus noise, so a network can learn it in a few
 * steps; uint8 like real images so the same transforms run. */
static void make_synthetic(int64_t n, tg_tensor *patterns, tg_tensor **x, tg_tensor **y) {
    TG_SCOPE {
        tg_tensor *labels = tg_randint(0, 10, TG_SHAPE(n), (tg_opts){.dtype = TG_INT64});
        tg_tensor *noise = tg_mul_scalar(tg_randn(TG_SHAPE(n, 3, 32, 32), (tg_opts){0}), 40);
        tg_tensor *pixels = tg_clamp(tg_add(tg_index_select(patterns, 0, labels), noise), 0, 255);
        *x = tg_retain(tg_cast(pixels, TG_UINT8));
        *y = tg_retain(labels);
    }
}

/* ToTensor + Normalize on a whole uint8 batch [N, C, H, W] at once (the test set). */
static tg_tensor *normalize_all(tg_tensor *images, const image_data *d) {
    float mean[3], std[3];
    for (int c = 0; c < d->channels; c++) mean[c] = (float)d->mean[c], std[c] = (float)d->std[c];
    tg_tensor *m = tg_from_data(mean, TG_SHAPE(1, d->channels, 1, 1), (tg_opts){0});
    tg_tensor *s = tg_from_data(std, TG_SHAPE(1, d->channels, 1, 1), (tg_opts){0});
    return tg_div(tg_sub(tg_div_scalar(tg_cast(images, TG_FLOAT32), 255), m), s);
}

/* [N, 28, 28] uint8 -> [N, 1, 32, 32]: 2 black pixels on every side, the usual way to
 * give MNIST-family images CIFAR's size. */
static tg_tensor *pad_to_32(tg_tensor *images) {
    int64_t n = tg_size(images, 0), pad[4] = {2, 2, 2, 2};
    return tg_pad(tg_reshape(images, TG_SHAPE(n, 1, 28, 28)), pad, 4, TG_PAD_CONSTANT, 0);
}

image_data image_data_load(const tut_args *args) {
    image_data d = {0};
    tg_tensor *test_images = NULL;
    if (args->synthetic) {
        d.channels = 3, d.name = "generated CIFAR-shaped data (--synthetic)";
        for (int c = 0; c < 3; c++) d.mean[c] = 0.5, d.std[c] = 0.25;
        tg_manual_seed(args->seed + 12345);
        TG_SCOPE {
            tg_tensor *patterns = tg_mul_scalar(tg_rand(TG_SHAPE(10, 3, 32, 32), (tg_opts){0}), 255);
            make_synthetic(SYNTHETIC_TRAIN, patterns, &d.train_x, &d.train_y);
            make_synthetic(SYNTHETIC_TEST, patterns, &test_images, &d.test_y);
        }
    } else if (strcmp(args->data_dir, TG_FASHION_MNIST_DIR) != 0) {
        const double mean[3] = TG_CIFAR10_MEAN, std[3] = TG_CIFAR10_STD;
        d.channels = 3, d.name = "CIFAR-10";
        memcpy(d.mean, mean, sizeof mean), memcpy(d.std, std, sizeof std);
        tg_cifar train = tg_cifar_load(args->data_dir, TG_CIFAR10, TG_CIFAR_TRAIN);
        tg_cifar test = tg_cifar_load(args->data_dir, TG_CIFAR10, TG_CIFAR_TEST);
        d.train_x = train.images, d.train_y = train.labels, test_images = test.images, d.test_y = test.labels;
    } else {
        /* The published 28 x 28 statistics; the black border shifts them a little, which
         * the first BatchNorm absorbs. */
        d.channels = 1, d.name = "Fashion-MNIST padded to 32 x 32";
        d.mean[0] = TG_FASHION_MNIST_MEAN, d.std[0] = TG_FASHION_MNIST_STD;
        TG_SCOPE {
            tg_mnist train = tg_mnist_load(args->data_dir, TG_MNIST_TRAIN);
            tg_mnist test = tg_mnist_load(args->data_dir, TG_MNIST_TEST);
            d.train_x = tg_retain(pad_to_32(train.images)), d.train_y = tg_retain(train.labels);
            test_images = tg_retain(pad_to_32(test.images)), d.test_y = tg_retain(test.labels);
        }
    }
    TG_SCOPE { d.test_x = tg_retain(normalize_all(test_images, &d)); }
    tg_release(test_images);
    return d;
}

void image_data_free(image_data *d) {
    tg_release(d->train_x);
    tg_release(d->train_y);
    tg_release(d->test_x);
    tg_release(d->test_y);
    *d = (image_data){0};
}

tg_compose image_data_augmentation(const image_data *d, bool normalize) {
    tg_transform steps[] = {
        tg_transform_random_crop(32, 4, TG_CROP_PAD_CONSTANT), /* zero padding, as the ResNet paper */
        tg_transform_random_horizontal_flip(0.5),
        tg_transform_to_tensor(),
        tg_transform_normalize(d->channels, d->mean, d->std),
    };
    return tg_compose_of(normalize ? 4 : 2, steps);
}
