/* libFuzzer target for the PNG and JPEG decoders of the image folder
 * (data/image_decode.h, libpng and libjpeg-turbo behind longjmp error handlers): any
 * input gives a [3, H, W] uint8 image or NULL + a message; nothing leaks (ASan's leak
 * check covers the libraries' state and our pixel buffers on every error path).
 * Built by tests/fuzz/run.sh; seeds are a PNG of each color type and two JPEGs. */
#include <stddef.h>
#include <stdint.h>

#include "core/scope.h"
#include "data/image_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tg_set_error_mode(TG_ERRORS_SILENT);
    tg_clear_error();
    TG_SCOPE {
        tg_tensor *img = tg_image_decode(data, size, "fuzz");
        TG_ASSERT(img || tg_last_error()[0]);
        if (img) {
            TG_ASSERT(tg_ndim(img) == 3 && tg_size(img, 0) == 3 && tg_dtype_of(img) == TG_UINT8);
            TG_ASSERT(tg_size(img, 1) * tg_size(img, 2) <= TG_IMAGE_MAX_PIXELS);
        }
    }
    TG_ASSERT(tg_live_tensors() == 0);
    return 0;
}
