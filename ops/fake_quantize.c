/* Fake quantisation (ops/fake_quantize.h): argument checks, the CPU loop of
 * ops/fake_quantize_formula.h, and the straight-through backward (grad * mask). */
#include "ops/fake_quantize.h"

#include <math.h>
#include <stdbool.h>

#include "autograd/function.h"
#include "core/error.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/cuda/fake_quantize.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

#include "ops/fake_quantize_formula.h"

typedef struct {
    float scale; /* per tensor */
    int64_t zero_point, quant_min, quant_max;
    int axis; /* per channel */
} fq_args;

#define FQ_LOOP(T)                                                                            \
    do {                                                                                      \
        const T *xv = tg_data_ptr(x);                                                         \
        T *yv = tg_data_ptr(out);                                                             \
        bool *mv = tg_data_ptr(mask);                                                         \
        for (int64_t i = 0; i < n; i++) {                                                     \
            float s = a->scale;                                                               \
            int64_t zp = a->zero_point;                                                       \
            if (scales) {                                                                     \
                int64_t c = i / inner % channels;                                             \
                s = scales[c];                                                                \
                zp = zero_points[c];                                                          \
            }                                                                                 \
            float inv = 1.0f / s;                                                             \
            TG_FAKE_QUANTIZE(T, xv[i], s, inv, zp, a->quant_min, a->quant_max, yv[i], mv[i]); \
        }                                                                                     \
    } while (0)

/* inputs: x, and for per channel scale (float32) and zero_point (int64), all on x's device */
static tg_tensor *fq_forward(tg_ctx *ctx, tg_tensor *const *in, bool per_channel) {
    const fq_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_contiguous(in[0]);
    if (!x) return NULL;
    tg_device dev = x->storage->device;
    tg_tensor *out = tg_empty(x->shape, (tg_opts){.dtype = x->dtype, .device = dev});
    tg_tensor *mask = tg_empty(x->shape, (tg_opts){.dtype = TG_BOOL, .device = dev});
    tg_tensor *sc = per_channel ? tg_contiguous(in[1]) : NULL, *zpt = per_channel ? tg_contiguous(in[2]) : NULL;
    if (!out || !mask || (per_channel && (!sc || !zpt))) return NULL;
    int64_t n = tg_numel(x), inner = 1, channels = 1;
    if (per_channel) {
        channels = x->shape.dims[a->axis];
        for (int d = a->axis + 1; d < x->shape.ndim; d++) inner *= x->shape.dims[d];
    }
    const char *op = per_channel ? "tg_fake_quantize_per_channel_affine" : "tg_fake_quantize_per_tensor_affine";
    if (tg_on_cuda(x)) {
        if (TG_CUDA_CALL(op, tg_cuda_fake_quantize, out, mask, x, a->scale, a->zero_point, sc, zpt, inner, channels,
                         a->quant_min, a->quant_max))
            return NULL;
    } else {
        const float *scales = sc ? tg_data_ptr(sc) : NULL;
        const int64_t *zero_points = zpt ? tg_data_ptr(zpt) : NULL;
        if (x->dtype == TG_FLOAT32) FQ_LOOP(float);
        else FQ_LOOP(double);
    }
    tg_ctx_save(ctx, mask);
    return out;
}

static tg_tensor *fq_tensor_forward(tg_ctx *ctx, tg_tensor *const *in) { return fq_forward(ctx, in, false); }
static tg_tensor *fq_channel_forward(tg_ctx *ctx, tg_tensor *const *in) { return fq_forward(ctx, in, true); }

/* The straight-through estimator: the gradient passes where x was not clamped. */
static void fq_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    tg_tensor *mask = tg_ctx_saved(ctx, 0);
    if (mask) grad_in[0] = tg_mul(g, tg_cast(mask, g->dtype));
}

static const tg_function fq_tensor_fn = {
    .name = "fake_quantize_per_tensor_affine", .num_inputs = 1, .forward = fq_tensor_forward, .backward = fq_backward};
static const tg_function fq_channel_fn = {.name = "fake_quantize_per_channel_affine",
                                          .num_inputs = 3,
                                          .forward = fq_channel_forward,
                                          .backward = fq_backward};

static tg_status check_input(const char *op, tg_tensor *x, int64_t quant_min, int64_t quant_max) {
    if (!x) return tg_error("%s: input is NULL", op);
    if (x->dtype != TG_FLOAT32 && x->dtype != TG_FLOAT64)
        return tg_error("%s: expected a float32 or float64 input, got %s", op, tg_dtype_name(x->dtype));
    if (quant_min > quant_max)
        return tg_error("%s: `quant_min` should be less than or equal to `quant_max`, got %lld and %lld", op,
                        (long long)quant_min, (long long)quant_max);
    return TG_OK;
}

tg_tensor *tg_fake_quantize_per_tensor_affine(tg_tensor *x, double scale, int64_t zero_point, int64_t quant_min,
                                              int64_t quant_max) {
    const char *op = "tg_fake_quantize_per_tensor_affine";
    if (check_input(op, x, quant_min, quant_max)) return NULL;
    if (zero_point < quant_min || zero_point > quant_max) {
        tg_error("%s: `zero_point` must be between `quant_min` and `quant_max`, got %lld not in [%lld, %lld]", op,
                 (long long)zero_point, (long long)quant_min, (long long)quant_max);
        return NULL;
    }
    fq_args a = {.scale = (float)scale, .zero_point = zero_point, .quant_min = quant_min, .quant_max = quant_max};
    return tg_apply_args(&fq_tensor_fn, (tg_tensor *[]){x}, &a, sizeof a);
}

tg_tensor *tg_fake_quantize_per_channel_affine(tg_tensor *x, tg_tensor *scale, tg_tensor *zero_point, int axis,
                                               int64_t quant_min, int64_t quant_max) {
    const char *op = "tg_fake_quantize_per_channel_affine";
    if (check_input(op, x, quant_min, quant_max)) return NULL;
    if (!scale || !zero_point) return tg_error("%s: scale and zero_point must not be NULL", op), NULL;
    if (axis < 0 || axis >= x->shape.ndim) {
        tg_error("%s: `axis` must be between 0 and the number of dimensions of the input (%d), got %d", op,
                 x->shape.ndim, axis);
        return NULL;
    }
    char xs[64], ss[64], zs[64];
    tg_shape_str(x->shape, xs, sizeof xs);
    tg_shape_str(scale->shape, ss, sizeof ss);
    tg_shape_str(zero_point->shape, zs, sizeof zs);
    int64_t c = x->shape.dims[axis];
    if (scale->shape.ndim != 1 || zero_point->shape.ndim != 1 || scale->shape.dims[0] != c ||
        zero_point->shape.dims[0] != c) {
        tg_error("%s: expected scale and zero_point of shape [%lld] (input %s, axis %d), got %s and %s", op,
                 (long long)c, xs, axis, ss, zs);
        return NULL;
    }
    if (scale->dtype != TG_FLOAT32 || (zero_point->dtype != TG_INT32 && zero_point->dtype != TG_INT64)) {
        tg_error("%s: expected a float32 scale and an int32 or int64 zero_point, got %s and %s", op,
                 tg_dtype_name(scale->dtype), tg_dtype_name(zero_point->dtype));
        return NULL;
    }
    if (tg_check_same_device(op, x, scale, "input and scale") ||
        tg_check_same_device(op, x, zero_point, "input and zero_point"))
        return NULL;
    tg_tensor *out = NULL;
    tg_scope_begin();
    tg_tensor *zp =
        tg_contiguous(tg_detach(zero_point->dtype == TG_INT64 ? zero_point : tg_cast(zero_point, TG_INT64)));
    tg_tensor *host = zp ? tg_tensor_to(zp, TG_CPU) : NULL;
    bool in_range = host != NULL;
    for (int64_t i = 0; host && i < c; i++) {
        int64_t z = ((const int64_t *)tg_data_ptr(host))[i];
        if (z < quant_min || z > quant_max) {
            tg_error("%s: `zero_point` must be between `quant_min` and `quant_max`, got %lld not in [%lld, %lld]", op,
                     (long long)z, (long long)quant_min, (long long)quant_max);
            in_range = false;
            break;
        }
    }
    if (in_range) {
        fq_args a = {.quant_min = quant_min, .quant_max = quant_max, .axis = axis};
        out = tg_scope_return(tg_apply_args(&fq_channel_fn, (tg_tensor *[]){x, tg_detach(scale), zp}, &a, sizeof a));
    }
    tg_scope_end();
    return out;
}
