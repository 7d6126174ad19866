/* A folder of images, one subfolder per class (torchvision.datasets.ImageFolder):
 *
 *     root/cat/001.png, root/cat/002.jpg, root/dog/a/x.jpeg, ...
 *
 *     tg_image_folder *f = tg_image_folder_new("root");
 *     // classes "cat" = 0, "dog" = 1; samples in ImageFolder's order
 *     tg_tensor *img, *label;
 *     tg_image_folder_get(f, 0, &img, &label);   // [3, H, W] uint8, [] int64
 *
 * Order, as ImageFolder's: the class folders (subfolders of root, symbolic links
 * followed) sorted by name (byte order, Python's str order for UTF-8 names) are
 * classes 0, 1, ...; within a class, every folder below it (os.walk, links followed)
 * sorted by path, and each folder's files sorted by name. Files are taken when their
 * name ends in .png, .jpg or .jpeg, any case (ImageFolder also takes .bmp, .ppm, .tif,
 * .webp ...: not decoded here, so skipped). Files are decoded when a sample is asked
 * for (data/image_decode.h: PIL's convert("RGB") semantics), so a bad file is an
 * error at that sample, naming it. A root without class folders, or a class folder
 * without images, is an error at tg_image_folder_new (as ImageFolder's).
 *
 * Ownership: the folder object is the caller's (tg_image_folder_free). Strings
 * returned are borrowed from it. Tensors returned are NEW references owned by the
 * innermost open scope, else by the caller. tg_image_folder_get may be called from
 * several threads at once (the loader's workers). */
#ifndef TG_DATA_IMAGE_FOLDER_H
#define TG_DATA_IMAGE_FOLDER_H

#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"
#include "data/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_image_folder tg_image_folder;

/* Scans root. NULL + error when root cannot be read, has no class folder, or a class
 * has no image file. Free with tg_image_folder_free. */
tg_image_folder *tg_image_folder_new(const char *root);
void tg_image_folder_free(tg_image_folder *f); /* NULL-safe */

int64_t tg_image_folder_size(const tg_image_folder *f); /* samples */
int tg_image_folder_num_classes(const tg_image_folder *f);
/* Class c's folder name (ImageFolder's classes[c]); NULL when out of range. Borrowed. */
const char *tg_image_folder_class_name(const tg_image_folder *f, int c);
/* Sample i's path (root/class/...) and class; NULL / -1 when out of range. */
const char *tg_image_folder_path(const tg_image_folder *f, int64_t i);
int64_t tg_image_folder_label(const tg_image_folder *f, int64_t i);

/* Sample i: *image = [3, H, W] uint8 (decoded now), *label = a 0-dim int64 tensor.
 * New references. Fails (both NULL) on an index out of range or a file that does not
 * decode (the message names the file). */
tg_status tg_image_folder_get(const tg_image_folder *f, int64_t i, tg_tensor **image, tg_tensor **label);

/* The folder as a loader data set (tg_loader_new_dataset). Borrows f: free the loader
 * before the folder. */
tg_dataset tg_image_folder_dataset(const tg_image_folder *f);

#ifdef __cplusplus
}
#endif
#endif
