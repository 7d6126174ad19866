/* The MNIST family on disk: IDX files (plain or gzipped) and the helpers that turn
 * their bytes into training inputs.
 *
 *     tg_mnist train = tg_mnist_load(TG_FASHION_MNIST_DIR, TG_MNIST_TRAIN);
 *     if (!train.images) { fprintf(stderr, "%s\n", tg_last_error()); return 1; }
 *     tg_tensor *x = tg_mnist_normalize(tg_mnist_to_float(train.images),
 *                                       TG_FASHION_MNIST_MEAN, TG_FASHION_MNIST_STD);
 *
 * IDX format (http://yann.lecun.com/exdb/mnist/): a big-endian header of two zero
 * bytes, a type code (0x08 ubyte, 0x09 sbyte, 0x0B int16, 0x0C int32, 0x0D float32,
 * 0x0E float64), a dimension count, then one uint32 size per dimension; then the
 * elements, big-endian, row-major. tapegrad reads the type codes it has a dtype for:
 * 0x08 -> uint8, 0x0C -> int32, 0x0D -> float32, 0x0E -> float64.
 *
 * Ownership: every function returning `tg_tensor *` (or a struct of them) returns NEW
 * references, owned by the innermost open scope, else by the caller. Failures return
 * NULL (all fields NULL) and record a message naming the file and what is wrong;
 * nothing is ever returned half-read.
 *
 * Only core/ is used, so data/ works without the op library. */
#ifndef TG_DATA_MNIST_H
#define TG_DATA_MNIST_H

#include <stddef.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where Debian's package `dataset-fashion-mnist` installs Fashion-MNIST. */
#define TG_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Per-pixel statistics of the training sets after scaling to [0, 1] (the values
 * torchvision's examples use), for tg_mnist_normalize. */
#define TG_MNIST_MEAN 0.1307
#define TG_MNIST_STD 0.3081
#define TG_FASHION_MNIST_MEAN 0.2860
#define TG_FASHION_MNIST_STD 0.3530

typedef enum { TG_MNIST_TRAIN = 0, TG_MNIST_TEST = 1 } tg_mnist_split;

typedef struct {
    tg_tensor *images; /* [N, H, W] uint8 (28 x 28 for the MNIST family) */
    tg_tensor *labels; /* [N] int64 */
} tg_mnist;

/* Loads one split of an MNIST-format data set from `dir` (torchvision.datasets.MNIST
 * without the download): "train-images-idx3-ubyte" + "train-labels-idx1-ubyte" for
 * TG_MNIST_TRAIN, "t10k-..." for TG_MNIST_TEST, each plain or with ".gz" (also the
 * "train-images.idx3-ubyte" spelling some mirrors use). Works for MNIST,
 * Fashion-MNIST, KMNIST and the like. Returns new references to both tensors, or both
 * NULL + an error when a file is missing (the message names the paths tried and the
 * Debian package that provides Fashion-MNIST), malformed, not uint8, of the wrong
 * rank (images 3, labels 1), or when image and label counts differ. */
tg_mnist tg_mnist_load(const char *dir, tg_mnist_split split);

/* Reads one IDX file, plain or gzipped (zlib's gzread handles both), into a tensor
 * of the file's dtype and shape. expected_ndim > 0 also requires that many
 * dimensions. Returns a new reference, or NULL + an error naming `path` (missing
 * file, gzip stream that ends early, and everything tg_idx_parse checks). */
tg_tensor *tg_idx_load(const char *path, int expected_ndim);

/* Parses an IDX image held in memory (the entry point of the file loader and of the
 * fuzz target). `name` only labels error messages (a path, or NULL). Checks the magic
 * (two zero bytes and a known type code), the dimension count (1..8, and equal to
 * expected_ndim when that is > 0), that the data is exactly as long as the header
 * says (truncated data and trailing bytes are both errors), and size overflow.
 * Returns a new CPU reference or NULL + error. */
tg_tensor *tg_idx_parse(const void *data, size_t nbytes, int expected_ndim, const char *name);

/* Images of any integer or float dtype -> float32 divided by 255 (torchvision's
 * ToTensor scaling), same shape, on the same device. New reference. Add the channel
 * dim for conv nets with tg_reshape(x, TG_SHAPE(n, 1, 28, 28)) (ops/shape.h). */
tg_tensor *tg_mnist_to_float(tg_tensor *images);

/* (x - mean) / std elementwise (torchvision's Normalize with one channel), float32
 * out (float64 stays float64), same shape and device. Fails on std <= 0 or a
 * non-finite mean/std. New reference. */
tg_tensor *tg_mnist_normalize(tg_tensor *x, double mean, double std);
/* Both at once, in one pass: uint8 images -> float32 (images / 255 - mean) / std,
 * without the intermediate [0, 1] copy (for a 60,000-image set that copy is 188 MB
 * of peak memory). New reference. */
tg_tensor *tg_mnist_to_normalized(tg_tensor *images, double mean, double std);

/* Mean and population standard deviation of all elements of x (any dtype, device,
 * strides), accumulated in double: what to pass to tg_mnist_normalize when the data
 * set's statistics are not known. Fails on NULL or empty x. */
tg_status tg_mnist_mean_std(tg_tensor *x, double *mean, double *std);

#ifdef __cplusplus
}
#endif
#endif
