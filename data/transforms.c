/* Image transforms (see data/transforms.h). Each step reads a contiguous CPU image and
 * writes a new one; the random ones draw torchvision's numbers (the comments name the
 * torchvision 0.14 functions they reproduce, from torchvision/transforms/transforms.py,
 * functional.py and functional_tensor.py; tests/data/gen_transforms.py does the same in
 * plain torch). */
#include "data/transforms.h"

#include <math.h>
#include <string.h>

#include "core/convert.h"
#include "core/error.h"
#include "core/rng_impl.h"
#include "core/scope.h"
#include "core/tensor_impl.h"

tg_transform tg_transform_random_crop(int64_t size, int64_t padding, tg_crop_padding_mode mode) {
    return (tg_transform){.kind = TG_TRANSFORM_RANDOM_CROP,
                          .size = {size, size},
                          .padding = {padding, padding, padding, padding},
                          .padding_mode = mode};
}

tg_transform tg_transform_random_horizontal_flip(double p) {
    return (tg_transform){.kind = TG_TRANSFORM_RANDOM_HORIZONTAL_FLIP, .p = p};
}

tg_transform tg_transform_to_tensor(void) { return (tg_transform){.kind = TG_TRANSFORM_TO_TENSOR}; }

tg_transform tg_transform_normalize(int channels, const double *mean, const double *std) {
    tg_transform t = {.kind = TG_TRANSFORM_NORMALIZE, .channels = channels};
    for (int c = 0; c < channels && c < TG_TRANSFORM_MAX_CHANNELS && mean && std; c++) {
        t.mean[c] = mean[c];
        t.std[c] = std[c];
    }
    return t;
}

tg_compose tg_compose_of(int count, const tg_transform *steps) {
    tg_compose c = {.count = count};
    if (count < 0 || count > TG_COMPOSE_MAX || (count > 0 && !steps)) {
        c.count = -1;
        return c;
    }
    for (int i = 0; i < count; i++) c.steps[i] = steps[i];
    return c;
}

/* ---- random numbers, as ATen's CPU kernels draw them ---- */

/* torch.randint(0, n, (1,)).item() for n < 2^32: one 32-bit word % n (random_from_to). */
static int64_t draw_randint(tg_mt19937 *gen, int64_t n) {
    tg_mt19937 *g = gen ? gen : &tg_rng_lock_cpu()->cpu;
    uint64_t word = (uint64_t)n >= (1ull << 32) ? tg_mt19937_next64(g) : tg_mt19937_next(g);
    if (!gen) tg_rng_unlock_cpu();
    return (int64_t)(word % (uint64_t)n);
}

/* torch.rand(1) (float32): 24 bits of one word times 2^-24 (uniform_real_distribution). */
static float draw_rand(tg_mt19937 *gen) {
    tg_mt19937 *g = gen ? gen : &tg_rng_lock_cpu()->cpu;
    uint32_t word = tg_mt19937_next(g);
    if (!gen) tg_rng_unlock_cpu();
    return (float)(word & ((1u << 24) - 1)) * 0x1p-24f;
}

/* ---- images ---- */

typedef struct {
    int64_t c, h, w;
} image_dims;

/* Checks img and gives a contiguous CPU version of it (img itself or a copy in the
 * current scope). */
static tg_tensor *image_input(const char *op, tg_tensor *img, image_dims *d) {
    if (tg_unusable_(img)) return tg_error_unusable_input(op, img, 0), NULL;
    int nd = tg_ndim(img);
    char shape[128];
    tg_shape_str(tg_shape_of(img), shape, sizeof shape);
    if (nd != 2 && nd != 3) return tg_error("%s: expected an image [C, H, W] or [H, W], got %s", op, shape), NULL;
    if (tg_device_of(img).kind != TG_DEVICE_CPU)
        return tg_error("%s: the image %s is not on the CPU; transforms run on CPU images (before the batch moves)", op,
                        shape),
               NULL;
    *d = (image_dims){nd == 3 ? tg_size(img, 0) : 1, tg_size(img, nd - 2), tg_size(img, nd - 1)};
    return tg_is_contiguous(img) ? img : tg_clone_values(img);
}

/* Where source coordinate s (may be outside [0, n)) reads from; -1: the fill value. */
static int64_t pad_source(int64_t s, int64_t n, tg_crop_padding_mode mode) {
    if (s >= 0 && s < n) return s;
    switch (mode) {
    case TG_CROP_PAD_EDGE: return s < 0 ? 0 : n - 1;
    case TG_CROP_PAD_REFLECT: return s < 0 ? -s : 2 * (n - 1) - s;
    case TG_CROP_PAD_SYMMETRIC: return s < 0 ? -s - 1 : 2 * n - 1 - s;
    default: return -1;
    }
}

/* torchvision RandomCrop.forward: F.pad, then RandomCrop.get_params: i = randint(0, h - th + 1), j = randint(0, w - tw + 1),
 * none drawn when (h, w) == (th, tw); then F.crop. The pad is not made: each output
 * pixel reads its padded source directly. */
static tg_tensor *random_crop(const tg_transform *t, tg_tensor *img, tg_mt19937 *gen) {
    const char *op = "tg_transform_apply (random crop)";
    image_dims d;
    tg_tensor *src = image_input(op, img, &d);
    if (!src) return NULL;
    const int64_t *pad = t->padding; /* left, top, right, bottom */
    int64_t th = t->size[0], tw = t->size[1];
    if (th <= 0 || tw <= 0 || pad[0] < 0 || pad[1] < 0 || pad[2] < 0 || pad[3] < 0 ||
        (unsigned)t->padding_mode > TG_CROP_PAD_SYMMETRIC)
        return tg_error("%s: bad parameters: size (%lld, %lld), padding (%lld, %lld, %lld, %lld), mode %d", op,
                        (long long)th, (long long)tw, (long long)pad[0], (long long)pad[1], (long long)pad[2],
                        (long long)pad[3], (int)t->padding_mode),
               NULL;
    /* F.pad's limits: reflect needs padding < the dim, symmetric <= (torch's errors). */
    int64_t limit_h = t->padding_mode == TG_CROP_PAD_REFLECT ? d.h - 1 : d.h;
    int64_t limit_w = t->padding_mode == TG_CROP_PAD_REFLECT ? d.w - 1 : d.w;
    if ((t->padding_mode == TG_CROP_PAD_REFLECT || t->padding_mode == TG_CROP_PAD_SYMMETRIC) &&
        (pad[1] > limit_h || pad[3] > limit_h || pad[0] > limit_w || pad[2] > limit_w))
        return tg_error("%s: %s padding (%lld, %lld, %lld, %lld) is too wide for a %lld x %lld image (at most %s the "
                        "size of each dim)",
                        op, t->padding_mode == TG_CROP_PAD_REFLECT ? "reflect" : "symmetric", (long long)pad[0],
                        (long long)pad[1], (long long)pad[2], (long long)pad[3], (long long)d.h, (long long)d.w,
                        t->padding_mode == TG_CROP_PAD_REFLECT ? "one less than" : ""),
               NULL;
    if ((d.h == 0 || d.w == 0) && t->padding_mode != TG_CROP_PAD_CONSTANT)
        return tg_error("%s: an empty %lld x %lld image cannot be padded by %s", op, (long long)d.h, (long long)d.w,
                        t->padding_mode == TG_CROP_PAD_EDGE ? "edge" : "reflection"),
               NULL;
    int64_t h = d.h + pad[1] + pad[3], w = d.w + pad[0] + pad[2];
    if (h < th || w < tw)
        return tg_error("%s: required crop size (%lld, %lld) is larger than the input image size (%lld, %lld) after "
                        "padding",
                        op, (long long)th, (long long)tw, (long long)h, (long long)w),
               NULL;
    int64_t i = 0, j = 0;
    if (!(h == th && w == tw)) {
        i = draw_randint(gen, h - th + 1);
        j = draw_randint(gen, w - tw + 1);
    }
    tg_shape shape = tg_shape_of(img);
    shape.dims[shape.ndim - 2] = th;
    shape.dims[shape.ndim - 1] = tw;
    tg_dtype dt = tg_dtype_of(img);
    tg_tensor *out = tg_empty(shape, (tg_opts){.dtype = dt});
    if (!out) return NULL;
    size_t es = tg_dtype_size(dt);
    char fill[16] = {0};
    tg_store_from_double(fill, dt, t->fill);
    const char *in = tg_data_ptr(src);
    char *o = tg_data_ptr(out);
    /* Output columns [x0, x1) read source columns inside the image: one memcpy per row;
     * only the padded columns go through pad_source. */
    int64_t x0 = pad[0] - j < 0 ? 0 : pad[0] - j < tw ? pad[0] - j : tw;
    int64_t x1 = pad[0] - j + d.w < x0 ? x0 : pad[0] - j + d.w < tw ? pad[0] - j + d.w : tw;
    for (int64_t c = 0; c < d.c; c++)
        for (int64_t y = 0; y < th; y++) {
            int64_t sy = pad_source(i + y - pad[1], d.h, t->padding_mode);
            char *row = o + (c * th + y) * tw * (int64_t)es;
            const char *src_row = in + (c * d.h + (sy < 0 ? 0 : sy)) * d.w * (int64_t)es;
            for (int64_t x = 0; x < tw; x++) {
                if (x == x0 && sy >= 0 && x1 > x0) {
                    memcpy(row + x * es, src_row + (j + x - pad[0]) * es, (size_t)(x1 - x0) * es);
                    x = x1 - 1;
                    continue;
                }
                int64_t sx = pad_source(j + x - pad[0], d.w, t->padding_mode);
                memcpy(row + x * es, sy < 0 || sx < 0 ? fill : src_row + sx * es, es);
            }
        }
    return out;
}

/* RandomHorizontalFlip.forward: if torch.rand(1) < self.p:
 * return F.hflip(img). The comparison is in float32 (the tensor's dtype). */
static tg_tensor *random_hflip(const tg_transform *t, tg_tensor *img, tg_mt19937 *gen) {
    const char *op = "tg_transform_apply (random horizontal flip)";
    if (!(t->p >= 0 && t->p <= 1)) return tg_error("%s: p %g is not a probability", op, t->p), NULL;
    image_dims d;
    tg_tensor *src = image_input(op, img, &d);
    if (!src) return NULL;
    bool flip = draw_rand(gen) < (float)t->p;
    tg_tensor *out = tg_empty(tg_shape_of(img), (tg_opts){.dtype = tg_dtype_of(img)});
    if (!out) return NULL;
    size_t es = tg_dtype_size(tg_dtype_of(img));
    const char *in = tg_data_ptr(src);
    char *o = tg_data_ptr(out);
    if (!flip) {
        if (d.c * d.h * d.w > 0) memcpy(o, in, (size_t)(d.c * d.h * d.w) * es);
        return out;
    }
    for (int64_t r = 0; r < d.c * d.h; r++)
        for (int64_t x = 0; x < d.w; x++) memcpy(o + (r * d.w + x) * es, in + (r * d.w + d.w - 1 - x) * es, es);
    return out;
}

/* functional.to_tensor: img.to(float32).div(255), one IEEE division. */
static tg_tensor *to_tensor(tg_tensor *img) {
    const char *op = "tg_transform_apply (to tensor)";
    image_dims d;
    tg_tensor *src = image_input(op, img, &d);
    if (!src) return NULL;
    if (tg_dtype_of(img) != TG_UINT8)
        return tg_error("%s: expected a uint8 image, got %s (ToTensor scales bytes to [0, 1])", op,
                        tg_dtype_name(tg_dtype_of(img))),
               NULL;
    tg_tensor *out = tg_empty(tg_shape_of(img), (tg_opts){.dtype = TG_FLOAT32});
    if (!out) return NULL;
    float table[256];
    for (int v = 0; v < 256; v++) table[v] = (float)v / 255.0f;
    const uint8_t *in = tg_data_ptr(src);
    float *o = tg_data_ptr(out);
    int64_t n = d.c * d.h * d.w;
    for (int64_t k = 0; k < n; k++) o[k] = table[in[k]];
    return out;
}

/* functional_tensor.normalize: mean and std as tensors of the image's dtype,
 * then tensor.sub_(mean).div_(std): two roundings in that dtype. */
static tg_tensor *normalize(const tg_transform *t, tg_tensor *img) {
    const char *op = "tg_transform_apply (normalize)";
    image_dims d;
    tg_tensor *src = image_input(op, img, &d);
    if (!src) return NULL;
    tg_dtype dt = tg_dtype_of(img);
    if (dt != TG_FLOAT32 && dt != TG_FLOAT64)
        return tg_error("%s: expected a float32 or float64 image, got %s (apply to-tensor first)", op,
                        tg_dtype_name(dt)),
               NULL;
    if (t->channels < 1 || t->channels > TG_TRANSFORM_MAX_CHANNELS || (t->channels != 1 && t->channels != d.c))
        return tg_error("%s: %d mean/std values for an image of %lld channels", op, t->channels, (long long)d.c), NULL;
    for (int c = 0; c < t->channels; c++)
        if (!isfinite(t->mean[c]) || !(t->std[c] != 0) || !isfinite(t->std[c]))
            return tg_error("%s: std evaluated to zero or mean/std not finite (channel %d: mean %g, std %g)", op, c,
                            t->mean[c], t->std[c]),
                   NULL;
    tg_tensor *out = tg_empty(tg_shape_of(img), (tg_opts){.dtype = dt});
    if (!out) return NULL;
    int64_t plane = d.h * d.w;
    for (int64_t c = 0; c < d.c; c++) {
        int k = t->channels == 1 ? 0 : (int)c;
        if (dt == TG_FLOAT32) {
            const float *in = (const float *)tg_data_ptr(src) + c * plane;
            float *o = (float *)tg_data_ptr(out) + c * plane;
            float m = (float)t->mean[k], s = (float)t->std[k];
            for (int64_t q = 0; q < plane; q++) o[q] = (in[q] - m) / s;
        } else {
            const double *in = (const double *)tg_data_ptr(src) + c * plane;
            double *o = (double *)tg_data_ptr(out) + c * plane;
            for (int64_t q = 0; q < plane; q++) o[q] = (in[q] - t->mean[k]) / t->std[k];
        }
    }
    return out;
}

tg_tensor *tg_transform_apply(const tg_transform *t, tg_tensor *img, tg_mt19937 *gen) {
    if (!t) return tg_error("tg_transform_apply: the transform is NULL"), NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *out = NULL;
        switch (t->kind) {
        case TG_TRANSFORM_RANDOM_CROP: out = random_crop(t, img, gen); break;
        case TG_TRANSFORM_RANDOM_HORIZONTAL_FLIP: out = random_hflip(t, img, gen); break;
        case TG_TRANSFORM_TO_TENSOR: out = to_tensor(img); break;
        case TG_TRANSFORM_NORMALIZE: out = normalize(t, img); break;
        default: tg_error("tg_transform_apply: unknown transform kind %d", (int)t->kind);
        }
        result = tg_scope_return(out);
    }
    return result;
}

tg_tensor *tg_compose_apply(const tg_compose *c, tg_tensor *img, tg_mt19937 *gen) {
    if (!c) return tg_error("tg_compose_apply: the composition is NULL"), NULL;
    if (c->count < 0 || c->count > TG_COMPOSE_MAX)
        return tg_error("tg_compose_apply: a composition holds 0 to %d steps (tg_compose_of was given more)",
                        TG_COMPOSE_MAX),
               NULL;
    if (tg_unusable_(img)) return tg_error_unusable_input("tg_compose_apply", img, 0), NULL;
    if (c->count == 0) return tg_scope_track(tg_retain(img));
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *x = img;
        for (int i = 0; i < c->count && x; i++) x = tg_transform_apply(&c->steps[i], x, gen);
        result = tg_scope_return(x);
    }
    return result;
}
