/* Interpolation as gathers: each spatial dim in turn is resampled by index_select of
 * its source rows (nearest), of the two neighbouring rows blended with per-row
 * weights (bilinear), or of four (bicubic, Keys' kernel with A = -0.75); the
 * interpolating modes are separable: rows, then columns. Indices and weights depend only
 * on the sizes, so they are computed here on the host (ATen's formulas,
 * aten/src/ATen/native/UpSample.h) and moved to x's device. See ops/interpolate.h. */
#include "ops/interpolate.h"

#include <math.h>
#include <stdlib.h>

#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

/* ATen's nearest_idx: the source index of output index i. */
static int64_t nearest_index(int64_t i, int64_t in, int64_t out, double scale_factor) {
    if (out == in) return i;
    if (out == 2 * in) return i >> 1;
    float scale = scale_factor > 0 ? (float)(1.0 / scale_factor) : (float)in / (float)out;
    int64_t src = (int64_t)floorf((float)i * scale);
    return src < in - 1 ? src : in - 1;
}

/* area_pixel_compute_scale + area_pixel_compute_source_index (linear), in double for a
 * float64 input and in float for float32 (ATen's opmath type). */
/* cubic: not clamped at 0 (ATen's cubic = true). */
static double linear_source(int64_t i, int64_t in, int64_t out, double scale_factor, bool align_corners, bool single,
                            bool cubic) {
    if (single) {
        float scale = align_corners ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f)
                                    : (scale_factor > 0 ? (float)(1.0 / scale_factor) : (float)in / (float)out);
        float src = align_corners ? scale * (float)i : scale * ((float)i + 0.5f) - 0.5f;
        return src < 0 && !cubic ? 0.0 : (double)src;
    }
    double scale = align_corners ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0)
                                 : (scale_factor > 0 ? 1.0 / scale_factor : (double)in / (double)out);
    double src = align_corners ? scale * (double)i : scale * ((double)i + 0.5) - 0.5;
    return src < 0 && !cubic ? 0.0 : src;
}

static tg_tensor *index_tensor(const int64_t *idx, int64_t n, tg_device device) {
    tg_tensor *t = tg_from_data(idx, TG_SHAPE(n), (tg_opts){.dtype = TG_INT64});
    return t ? tg_tensor_to(t, device) : NULL;
}

/* ATen's get_cubic_upsample_coefficients (A = -0.75) for the taps at floor(src) - 1 ..
 * floor(src) + 2, t = src - floor(src); CUBIC_COEFFS(T) computes them in T (float for a
 * float32 input, as ATen's opmath type). */
#define CUBIC_CONV1(T, x, A) ((((A) + 2) * (x) - ((A) + 3)) * (x) * (x) + 1)
#define CUBIC_CONV2(T, x, A) (((((A) * (x)) - 5 * (A)) * (x) + 8 * (A)) * (x)-4 * (A))
#define CUBIC_COEFFS(T, t, c)                               \
    do {                                                    \
        const T A_ = (T)-0.75, x1_ = (t), x2_ = (T)1 - (t); \
        (c)[0] = CUBIC_CONV2(T, (T)(x1_ + (T)1), A_);       \
        (c)[1] = CUBIC_CONV1(T, x1_, A_);                   \
        (c)[2] = CUBIC_CONV1(T, x2_, A_);                   \
        (c)[3] = CUBIC_CONV2(T, (T)(x2_ + (T)1), A_);       \
    } while (0)

/* Bicubic along one dim: y = sum over the four taps of x[clamp(tap)] * weight. */
static tg_tensor *cubic_dim(tg_tensor *x, int dim, int64_t out, double scale_factor, bool align_corners) {
    int64_t in = x->shape.dims[dim];
    tg_device device = x->storage->device;
    bool single = x->dtype == TG_FLOAT32;
    int64_t *idx = malloc((size_t)(4 * out) * sizeof *idx);
    double *weight = malloc((size_t)(4 * out) * sizeof *weight);
    TG_ASSERT(idx && weight);
    for (int64_t i = 0; i < out; i++) {
        double src = linear_source(i, in, out, scale_factor, align_corners, single, true);
        /* ATen's guard_index_and_lambda: the index at most in - 1, t in [0, 1] */
        int64_t lo = (int64_t)floor(src);
        if (lo > in - 1) lo = in - 1;
        double c[4];
        if (single) {
            float t = (float)src - (float)lo, cf[4];
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            CUBIC_COEFFS(float, t, cf);
            for (int k = 0; k < 4; k++) c[k] = cf[k];
        } else {
            double t = src - (double)lo;
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            CUBIC_COEFFS(double, t, c);
        }
        for (int k = 0; k < 4; k++) {
            int64_t tap = lo - 1 + k; /* ATen's upsample_get_value_bounded: clamped into the input */
            idx[k * out + i] = tap < 0 ? 0 : tap > in - 1 ? in - 1 : tap;
            weight[k * out + i] = c[k];
        }
    }
    tg_tensor *y = NULL;
    tg_shape wshape = {.ndim = 4, .dims = {1, 1, 1, 1}};
    wshape.dims[dim] = out;
    for (int k = 0; k < 4; k++) {
        tg_tensor *w = tg_from_data(weight + k * out, wshape, (tg_opts){.dtype = TG_FLOAT64});
        w = w ? tg_tensor_to(tg_cast(w, x->dtype), device) : NULL;
        tg_tensor *index = index_tensor(idx + k * out, out, device);
        tg_tensor *term = w && index ? tg_mul(tg_index_select(x, dim, index), w) : NULL;
        y = !term ? NULL : k == 0 ? term : y ? tg_add(y, term) : NULL;
        if (!y) break;
    }
    free(idx);
    free(weight);
    return y;
}

/* Resamples dim `dim` (2 or 3) of x from `in` to `out` positions. */
static tg_tensor *resample_dim(tg_tensor *x, int dim, int64_t out, double scale_factor, const tg_interpolate_opts *o) {
    int64_t in = x->shape.dims[dim];
    tg_device device = x->storage->device;
    int64_t *lo = malloc((size_t)out * sizeof *lo), *hi = malloc((size_t)out * sizeof *hi);
    double *lambda = malloc((size_t)out * sizeof *lambda);
    TG_ASSERT(lo && hi && lambda);
    tg_tensor *y = NULL;
    if (o->mode == TG_INTERP_NEAREST) {
        for (int64_t i = 0; i < out; i++) lo[i] = nearest_index(i, in, out, scale_factor);
        tg_tensor *index = index_tensor(lo, out, device);
        y = index ? tg_index_select(x, dim, index) : NULL;
    } else {
        bool single = x->dtype == TG_FLOAT32;
        for (int64_t i = 0; i < out; i++) {
            if (out == in) { /* ATen's identity case: the row itself */
                lo[i] = hi[i] = i;
                lambda[i] = 0;
                continue;
            }
            double src = linear_source(i, in, out, scale_factor, o->align_corners, single, false);
            lo[i] = (int64_t)src;
            hi[i] = lo[i] + (lo[i] < in - 1 ? 1 : 0);
            lambda[i] = single ? (double)((float)src - (float)lo[i]) : src - (double)lo[i];
        }
        tg_shape wshape = {.ndim = 4, .dims = {1, 1, 1, 1}};
        wshape.dims[dim] = out;
        tg_tensor *l1 = tg_from_data(lambda, wshape, (tg_opts){.dtype = TG_FLOAT64});
        l1 = l1 ? tg_tensor_to(tg_cast(l1, x->dtype), device) : NULL;
        tg_tensor *ilo = index_tensor(lo, out, device), *ihi = index_tensor(hi, out, device);
        if (l1 && ilo && ihi) {
            /* lambda0 * x[lo] + lambda1 * x[hi], lambda0 = 1 - lambda1 (ATen's weights) */
            tg_tensor *l0 = tg_rsub_scalar(l1, 1.0);
            y = tg_add(tg_mul(tg_index_select(x, dim, ilo), l0), tg_mul(tg_index_select(x, dim, ihi), l1));
        }
    }
    free(lo);
    free(hi);
    free(lambda);
    return y;
}

tg_tensor *tg_interpolate(tg_tensor *x, tg_interpolate_opts opts) {
    const char *op = "tg_interpolate";
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), NULL;
    char xs[128];
    tg_shape_str(x->shape, xs, sizeof xs);
    if (x->shape.ndim != 4) return tg_error("%s: expected input [N, C, H, W] (4-D, every mode), got %s", op, xs), NULL;
    if (!tg_dtype_is_floating(x->dtype))
        return tg_error("%s: expected a floating input, got %s", op, tg_dtype_name(x->dtype)), NULL;
    if (opts.mode != TG_INTERP_NEAREST && opts.mode != TG_INTERP_BILINEAR && opts.mode != TG_INTERP_BICUBIC)
        return tg_error("%s: unknown mode %d (TG_INTERP_NEAREST, TG_INTERP_BILINEAR or TG_INTERP_BICUBIC)", op,
                        (int)opts.mode),
               NULL;
    if (opts.align_corners && opts.mode == TG_INTERP_NEAREST)
        return tg_error("%s: align_corners option can only be set with the interpolating modes: bilinear | bicubic",
                        op),
               NULL;
    bool has_size = opts.size[0] != 0 || opts.size[1] != 0;
    bool has_scale = opts.scale_factor[0] != 0 || opts.scale_factor[1] != 0;
    if (has_size == has_scale)
        return tg_error("%s: %s", op,
                        has_size ? "only one of size or scale_factor should be defined"
                                 : "either size or scale_factor should be defined"),
               NULL;
    int64_t out[2];
    double scale[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
        if (has_size) {
            out[d] = opts.size[d] ? opts.size[d] : opts.size[0];
            continue;
        }
        scale[d] = opts.scale_factor[d] ? opts.scale_factor[d] : opts.scale_factor[0];
        if (!(scale[d] > 0) || !isfinite(scale[d]))
            return tg_error("%s: scale_factor must be positive and finite, got %g", op, scale[d]), NULL;
        out[d] = (int64_t)floor((double)x->shape.dims[2 + d] * scale[d]);
    }
    if (out[0] <= 0 || out[1] <= 0 || x->shape.dims[2] <= 0 || x->shape.dims[3] <= 0)
        return tg_error("%s: input %s and output size %lldx%lld must be non-empty", op, xs, (long long)out[0],
                        (long long)out[1]),
               NULL;
    tg_tensor *y = NULL;
    TG_SCOPE {
        tg_tensor *both = NULL;
        if (opts.mode == TG_INTERP_BICUBIC && out[0] == x->shape.dims[2] && out[1] == x->shape.dims[3]) {
            both = tg_clone(x); /* ATen's same-size special case: a copy */
        } else if (opts.mode == TG_INTERP_BICUBIC) {
            tg_tensor *rows = cubic_dim(x, 2, out[0], scale[0], opts.align_corners);
            both = rows ? cubic_dim(rows, 3, out[1], scale[1], opts.align_corners) : NULL;
        } else {
            tg_tensor *rows = resample_dim(x, 2, out[0], scale[0], &opts);
            both = rows ? resample_dim(rows, 3, out[1], scale[1], &opts) : NULL;
        }
        if (both) y = tg_scope_return(both);
    }
    return y;
}
