/* PNG (libpng) and JPEG (libjpeg-turbo) decoding to [3, H, W] uint8 (see data/image_decode.h).
 *
 * Both libraries report fatal errors by longjmp. Everything the error path frees lives
 * in a struct reached through a pointer (never in a local written after setjmp), so its
 * values are defined after the jump; the jump lands in the function that made the
 * library's objects, which destroys them and frees the buffers. */
#include "data/image_decode.h"

#include <errno.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

#include "core/error.h"
#include "core/scope.h"

/* What an error path cleans up and reports. */
typedef struct {
    const char *name;
    const uint8_t *data;
    size_t size, pos; /* pos: bytes handed to the decoder so far */
    uint8_t *pixels;  /* [H, W, 3] */
    uint8_t **rows;   /* PNG row pointers into pixels */
    char message[JMSG_LENGTH_MAX > 200 ? JMSG_LENGTH_MAX : 200];
    jmp_buf jump;
} decode_ctx;

static bool too_many_pixels(decode_ctx *c, const char *format, uint64_t w, uint64_t h) {
    if (w == 0 || h == 0) {
        tg_error("tg_image_decode: %s: the %s header says %llu x %llu pixels (an empty image)", c->name, format,
                 (unsigned long long)w, (unsigned long long)h);
        return true;
    }
    if (w * h <= (uint64_t)TG_IMAGE_MAX_PIXELS) return false;
    tg_error("tg_image_decode: %s: %llu x %llu pixels is over the %lld-pixel limit (PIL's "
             "DecompressionBombError): a decompression bomb or a corrupt header",
             c->name, (unsigned long long)w, (unsigned long long)h, TG_IMAGE_MAX_PIXELS);
    return true;
}

/* [H, W, 3] -> a new [3, H, W] tensor. */
static tg_tensor *hwc_to_chw(const uint8_t *hwc, int64_t h, int64_t w) {
    tg_tensor *t = tg_empty(TG_SHAPE(3, h, w), (tg_opts){.dtype = TG_UINT8});
    if (!t) return NULL;
    uint8_t *out = tg_data_ptr(t);
    int64_t plane = h * w;
    for (int64_t i = 0; i < plane; i++) {
        out[i] = hwc[3 * i];
        out[plane + i] = hwc[3 * i + 1];
        out[2 * plane + i] = hwc[3 * i + 2];
    }
    return t;
}

/* ---- PNG ---- */

static void png_read_mem(png_structp png, png_bytep out, size_t n) {
    decode_ctx *c = png_get_io_ptr(png);
    if (n > c->size - c->pos) png_error(png, "unexpected end of file (the file is truncated)");
    memcpy(out, c->data + c->pos, n);
    c->pos += n;
}

static void png_on_error(png_structp png, png_const_charp msg) {
    decode_ctx *c = png_get_error_ptr(png);
    snprintf(c->message, sizeof c->message, "%s", msg);
    longjmp(c->jump, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static tg_tensor *decode_png(decode_ctx *c) {
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        return tg_error("tg_image_decode: %s: out of memory for libpng's state", c->name), NULL;
    }
    tg_tensor *result = NULL;
    if (setjmp(c->jump)) {
        tg_error("tg_image_decode: %s: corrupt PNG at byte offset %zu: %s", c->name, c->pos, c->message);
    } else {
        png_set_read_fn(png, c, png_read_mem);
        /* CRC errors are errors (libpng's default for critical chunks; ancillary ones too,
         * as PIL checks every CRC). */
        png_set_crc_action(png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
        png_read_info(png, info);
        png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
        int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
        if (!too_many_pixels(c, "PNG", w, h)) {
            if (depth == 16) png_set_strip_16(png);
            if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
            if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
            if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
            /* libpng's palette expansion turns a tRNS chunk into an alpha channel: dropped too. */
            if ((color & PNG_COLOR_MASK_ALPHA) ||
                (color == PNG_COLOR_TYPE_PALETTE && png_get_valid(png, info, PNG_INFO_tRNS)))
                png_set_strip_alpha(png);
            png_set_interlace_handling(png);
            png_read_update_info(png, info);
            if (png_get_rowbytes(png, info) != (size_t)w * 3)
                png_error(png, "unexpected row size after conversion to RGB");
            c->pixels = malloc((size_t)w * h * 3);
            c->rows = malloc(sizeof *c->rows * h);
            if (!c->pixels || !c->rows) {
                tg_error("tg_image_decode: %s: out of memory for a %u x %u image", c->name, (unsigned)w, (unsigned)h);
            } else {
                for (png_uint_32 y = 0; y < h; y++) c->rows[y] = c->pixels + (size_t)y * w * 3;
                png_read_image(png, c->rows);
                png_read_end(png, NULL);
                result = hwc_to_chw(c->pixels, h, w);
            }
        }
    }
    png_destroy_read_struct(&png, &info, NULL);
    return result;
}

/* ---- JPEG ---- */

typedef struct {
    struct jpeg_error_mgr base;
    decode_ctx *ctx;
} jpeg_error_state;

static void jpeg_on_error(j_common_ptr cinfo) {
    jpeg_error_state *e = (jpeg_error_state *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->ctx->message);
    longjmp(e->ctx->jump, 1);
}

/* Level -1 is a warning about corrupt data ("Premature end of JPEG file", "Corrupt JPEG
 * data"), after which libjpeg goes on with gray pixels: an error here, as in PIL. */
static void jpeg_on_message(j_common_ptr cinfo, int level) {
    if (level < 0) jpeg_on_error(cinfo);
}

static size_t jpeg_pos(decode_ctx *c, struct jpeg_decompress_struct *cinfo) {
    return cinfo->src ? c->size - cinfo->src->bytes_in_buffer : 0;
}

static tg_tensor *decode_jpeg(decode_ctx *c) {
    struct jpeg_decompress_struct cinfo;
    jpeg_error_state err;
    cinfo.err = jpeg_std_error(&err.base);
    err.base.error_exit = jpeg_on_error;
    err.base.emit_message = jpeg_on_message;
    err.ctx = c;
    tg_tensor *result = NULL;
    /* cinfo and err are not written after setjmp (libjpeg writes through pointers). */
    if (setjmp(c->jump)) {
        tg_error("tg_image_decode: %s: corrupt JPEG at byte offset %zu: %s", c->name, jpeg_pos(c, &cinfo), c->message);
    } else {
        jpeg_create_decompress(&cinfo);
        jpeg_mem_src(&cinfo, c->data, (unsigned long)c->size);
        jpeg_read_header(&cinfo, TRUE);
        if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
            tg_error("tg_image_decode: %s: CMYK JPEGs are not supported (convert it to RGB first)", c->name);
        } else if (!too_many_pixels(c, "JPEG", cinfo.image_width, cinfo.image_height)) {
            cinfo.out_color_space = JCS_RGB; /* grayscale repeated, YCbCr converted */
            jpeg_start_decompress(&cinfo);
            size_t row = (size_t)cinfo.output_width * 3;
            c->pixels = malloc(row * cinfo.output_height);
            if (!c->pixels) {
                tg_error("tg_image_decode: %s: out of memory for a %u x %u image", c->name, cinfo.output_width,
                         cinfo.output_height);
            } else {
                while (cinfo.output_scanline < cinfo.output_height) {
                    JSAMPROW r = c->pixels + row * cinfo.output_scanline;
                    jpeg_read_scanlines(&cinfo, &r, 1);
                }
                jpeg_finish_decompress(&cinfo);
                result = hwc_to_chw(c->pixels, cinfo.output_height, cinfo.output_width);
            }
        }
    }
    jpeg_destroy_decompress(&cinfo);
    return result;
}

/* ---- entry points ---- */

tg_tensor *tg_image_decode(const void *data, size_t nbytes, const char *name) {
    decode_ctx *c = calloc(1, sizeof *c);
    if (!c) return tg_error("tg_image_decode: out of memory"), NULL;
    c->name = name ? name : "<memory>";
    c->data = data;
    c->size = nbytes;
    static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    tg_tensor *t = NULL;
    if (!data && nbytes) {
        tg_error("tg_image_decode: %s: data is NULL", c->name);
    } else if (nbytes >= 8 && memcmp(data, png_magic, 8) == 0) {
        t = decode_png(c);
    } else if (nbytes >= 3 && memcmp(data, "\xff\xd8\xff", 3) == 0) {
        t = decode_jpeg(c);
    } else {
        const uint8_t *p = data;
        tg_error("tg_image_decode: %s: not a PNG or JPEG file (it starts with %02x %02x %02x %02x, %zu bytes)", c->name,
                 nbytes > 0 ? p[0] : 0, nbytes > 1 ? p[1] : 0, nbytes > 2 ? p[2] : 0, nbytes > 3 ? p[3] : 0, nbytes);
    }
    free(c->pixels);
    free(c->rows);
    free(c);
    return t;
}

tg_tensor *tg_image_load(const char *path) {
    if (!path) return tg_error("tg_image_load: path is NULL"), NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return tg_error("tg_image_load: cannot open %s: %s", path, strerror(errno)), NULL;
    size_t len = 0, cap = 1 << 16;
    uint8_t *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        uint8_t *grown = realloc(buf, cap * 2);
        if (!grown) free(buf);
        buf = grown;
        cap *= 2;
    }
    int failed = ferror(f);
    fclose(f);
    if (!buf) return tg_error("tg_image_load: %s: out of memory reading the file", path), NULL;
    tg_tensor *t = failed ? NULL : tg_image_decode(buf, len, path);
    if (failed) tg_error("tg_image_load: %s: read error", path);
    free(buf);
    return t;
}
