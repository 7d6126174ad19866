/* PNG and JPEG files decoded to RGB tensors, as torchvision's default loader does
 * (PIL.Image.open(f).convert("RGB")), for the image-folder data set (data/image_folder.h).
 *
 *     tg_tensor *img = tg_image_load("cat.png");   // [3, H, W] uint8, channels R, G, B
 *
 * Decoders: libpng and libjpeg-turbo (Debian's libpng-dev and libjpeg62-turbo-dev).
 * The format comes from the file's signature, not its name. Conversions, as PIL's
 * convert("RGB"): grayscale is repeated into the three channels; an alpha channel,
 * a palette's transparency and tRNS chunks are dropped (not composited); palettes are
 * looked up; 1, 2 and 4-bit grayscale is scaled to 0..255; 16-bit samples keep their
 * high byte (PIL does this for RGB; for 16-bit grayscale PIL clips instead). JPEGs are
 * decoded with libjpeg's defaults (islow IDCT, fancy upsampling), the settings PIL
 * uses with the same library. CMYK/YCCK JPEGs are refused (PIL inverts Adobe CMYK;
 * not reproduced). A corrupt or truncated file is an error, as PIL's "image file is
 * truncated": libjpeg's warnings about corrupt data count as errors.
 *
 * Ownership: tensors returned are NEW references, owned by the innermost open scope,
 * else by the caller. Failures return NULL and record a message naming the file and
 * the byte offset the decoder had reached, with libpng's or libjpeg's own message.
 * Images over 178,956,970 pixels are refused (PIL's DecompressionBombError limit). */
#ifndef TG_DATA_IMAGE_DECODE_H
#define TG_DATA_IMAGE_DECODE_H

#include <stddef.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest width * height decoded (PIL's MAX_IMAGE_PIXELS * 2). */
#define TG_IMAGE_MAX_PIXELS 178956970LL

/* Decodes a PNG or JPEG image held in memory to [3, H, W] uint8 (CHW, RGB). `name`
 * labels error messages (a path, or NULL). New reference or NULL + error. */
tg_tensor *tg_image_decode(const void *data, size_t nbytes, const char *name);

/* Reads and decodes the file at `path` (any name; the signature decides). New
 * reference or NULL + error naming the path. */
tg_tensor *tg_image_load(const char *path);

#ifdef __cplusplus
}
#endif
#endif
