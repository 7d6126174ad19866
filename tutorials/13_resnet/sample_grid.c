/* The augmentation grid as a PNG, written with libpng (sample_grid.h). */
#include "tutorials/13_resnet/sample_grid.h"

#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GAP = 2 };

static int write_png(const char *path, const unsigned char *pixels, int width, int height, int channels) {
    FILE *f = fopen(path, "wb");
    png_structp png = f ? png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL) : NULL;
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) { /* libpng longjmps here on a write error */
        fprintf(stderr, "cannot write %s\n", path);
        if (png) png_destroy_write_struct(&png, info ? &info : NULL);
        if (f) fclose(f);
        return -1;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8,
                 channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < height; y++) png_write_row(png, (png_const_bytep)(pixels + (size_t)y * width * channels));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return fclose(f) == 0 ? 0 : -1;
}

int save_augmentation_grid(const char *path, tg_tensor *images, const tg_compose *augment, int rows, int cols,
                           uint64_t seed) {
    int channels = (int)tg_size(images, 1), side_h = (int)tg_size(images, 2), side_w = (int)tg_size(images, 3);
    int width = GAP + cols * (side_w + GAP), height = GAP + rows * (side_h + GAP);
    unsigned char *pixels = malloc((size_t)width * height * channels);
    memset(pixels, 255, (size_t)width * height * channels);
    tg_mt19937 gen;
    tg_mt19937_seed(&gen, seed);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) TG_SCOPE {
                tg_tensor *image = tg_select(images, 0, r);
                if (c > 0) image = tg_compose_apply(augment, image, &gen);
                const unsigned char *planes = tg_data_ptr(tg_contiguous(image)); /* [C, H, W] */
                for (int y = 0; y < side_h; y++)
                    for (int x = 0; x < side_w; x++)
                        for (int k = 0; k < channels; k++) /* planes -> interleaved RGB */
                            pixels[((size_t)(GAP + r * (side_h + GAP) + y) * width + GAP + c * (side_w + GAP) + x) *
                                       channels +
                                   k] = planes[((size_t)k * side_h + y) * side_w + x];
            }
    int status = write_png(path, pixels, width, height, channels);
    free(pixels);
    return status;
}
