/* CIFAR-10 and CIFAR-100 in their binary versions (https://www.cs.toronto.edu/~kriz/cifar.html,
 * "binary version" archives), as torchvision.datasets.CIFAR10 / CIFAR100 give them.
 *
 *     tg_cifar train = tg_cifar_load("cifar-10-batches-bin", TG_CIFAR10, TG_CIFAR_TRAIN);
 *     if (!train.images) { fprintf(stderr, "%s\n", tg_last_error()); return 1; }
 *     // images [50000, 3, 32, 32] uint8, labels [50000] int64
 *
 * Format: a file is a sequence of records, each the label byte(s) then 3072 pixel
 * bytes: the 1024 red values of the 32 x 32 image row by row, then green, then blue
 * (CHW already). CIFAR-10: 1 label byte (0..9), files data_batch_1.bin ..
 * data_batch_5.bin (train, 10,000 records each) and test_batch.bin. CIFAR-100: 2 label
 * bytes, coarse (0..19) then fine (0..99), files train.bin and test.bin.
 *
 * Ownership: the tensors returned are NEW references, owned by the innermost open
 * scope, else by the caller. Failures return both fields NULL and record a message
 * naming the file and the byte offset of the problem (a truncated record, a label out
 * of range); nothing is returned half-read. Only core/ is used. */
#ifndef TG_DATA_CIFAR_H
#define TG_DATA_CIFAR_H

#include <stddef.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TG_CIFAR_TRAIN = 0, TG_CIFAR_TEST = 1 } tg_cifar_split;

/* Which data set, and for CIFAR-100 which of its two labels (torchvision's CIFAR100
 * gives the fine ones). */
typedef enum {
    TG_CIFAR10 = 0,         /* 1 label byte, 10 classes */
    TG_CIFAR100 = 1,        /* 2 label bytes, the fine label: 100 classes */
    TG_CIFAR100_COARSE = 2, /* 2 label bytes, the coarse label: 20 superclasses */
} tg_cifar_kind;

enum { TG_CIFAR_IMAGE_BYTES = 3 * 32 * 32 };

typedef struct {
    tg_tensor *images; /* [N, 3, 32, 32] uint8, channels R, G, B */
    tg_tensor *labels; /* [N] int64 */
} tg_cifar;

/* Per-channel statistics of CIFAR-10's training set after scaling to [0, 1] (the values
 * used by most CIFAR training scripts), for tg_transform_normalize (data/transforms.h). */
#define TG_CIFAR10_MEAN \
    { 0.4914, 0.4822, 0.4465 }
#define TG_CIFAR10_STD \
    { 0.2470, 0.2435, 0.2616 }

/* Loads one split from `dir`: the directory holding the .bin files, or the one the
 * archive unpacks into it (cifar-10-batches-bin/, cifar-100-binary/), which is looked
 * for too. The train split of CIFAR-10 is the five batches in order. Returns new
 * references, or both NULL + an error (a missing file names the paths tried). */
tg_cifar tg_cifar_load(const char *dir, tg_cifar_kind kind, tg_cifar_split split);

/* Parses the records held in memory (the entry point of the loader and of the fuzz
 * target). `name` labels error messages (a path, or NULL). An empty input, a length
 * that is not a whole number of records ("truncated record at byte offset ...") and a
 * label out of range are errors. Returns new CPU references or both NULL + error. */
tg_cifar tg_cifar_parse(const void *data, size_t nbytes, tg_cifar_kind kind, const char *name);

#ifdef __cplusplus
}
#endif
#endif
