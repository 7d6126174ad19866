#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert.h"
#include "core/iter.h"
#include "core/lowp.h"
#include "core/parallel.h"
#include "core/scope.h"
#include "core/simd.h"
#include "core/tensor_impl.h"

void tg_contiguous_strides(tg_shape shape, int64_t *strides) { tg_contiguous_strides_inline(&shape, strides); }

/* tg_check_creation on pointers: make() calls it for every new tensor, where copying
 * the shape into a call showed in the per-op profile. */
static tg_status check_creation(const char *op, const tg_shape *shape, const tg_opts *opts) {
    char buf[128];
    if (shape->ndim < 0 || shape->ndim > TG_MAX_DIMS)
        return tg_error("%s: %d dims requested, at most %d are supported", op, shape->ndim, TG_MAX_DIMS);
    int64_t numel = 1;
    for (int i = 0; i < shape->ndim; i++)
        if (shape->dims[i] < 0)
            return tg_error("%s: negative size %lld in shape %s", op, (long long)shape->dims[i],
                            tg_shape_str(*shape, buf, sizeof buf));
    /* Sizes whose byte count overflows (zero-size dims excepted) are refused here, so
     * that no later product of sizes overflows. */
    for (int i = 0; i < shape->ndim && numel != 0; i++) {
        if (shape->dims[i] != 0 && numel > INT64_MAX / 8 / shape->dims[i])
            return tg_error("%s: shape %s has too many elements", op, tg_shape_str(*shape, buf, sizeof buf));
        numel *= shape->dims[i];
    }
    if ((unsigned)opts->dtype >= TG_NUM_DTYPES /* tg_dtype_is_supported */)
        return tg_error("%s: dtype %s is not supported", op, tg_dtype_name(opts->dtype));
    if (opts->requires_grad && !tg_dtype_is_floating(opts->dtype))
        return tg_error("%s: only floating-point tensors can require grad, not %s", op, tg_dtype_name(opts->dtype));
    if (opts->device.kind != TG_DEVICE_CPU && !tg_backend_for(opts->device, op)) return TG_ERROR;
    return TG_OK;
}

tg_status tg_check_creation(const char *op, tg_shape shape, tg_opts opts) { return check_creation(op, &shape, &opts); }

static tg_tensor *make(const char *op, tg_shape shape, tg_opts opts) {
    if (check_creation(op, &shape, &opts)) return NULL;
    size_t nbytes = (size_t)tg_shape_numel_inline(&shape) * tg_dtype_size_inline(opts.dtype);
    tg_storage *s = tg_storage_new(nbytes, opts.device, op);
    if (!s) return NULL;
    tg_tensor *t = tg_tensor_wrap(s, opts.dtype, shape, NULL, 0);
    if (t) t->requires_grad = opts.requires_grad;
    return t;
}

tg_tensor *tg_empty(tg_shape shape, tg_opts opts) { return make("tg_empty", shape, opts); }

/* PyTorch's checked_convert (c10/util/TypeCast.h): a value an integer dtype cannot
 * hold is an error ("value cannot be converted to type int64_t without overflow"),
 * never the undefined double -> integer conversion of C. An integral value follows the
 * rule for a Python int (uint8 takes -255 .. 255, the negatives wrapping as in
 * PyTorch), a fractional one the rule for a float (truncated; uint8 takes [0, 255]).
 * INT64's bound is 2^63 exclusive (PyTorch compares with (double)INT64_MAX = 2^63,
 * which lets 2^63 through to an undefined conversion). */
tg_status tg_check_fill_value(const char *op, tg_dtype dtype, double v) {
    double lo, hi; /* inclusive */
    switch (dtype) {
    case TG_INT64: lo = -0x1p63, hi = 0x1p63; break;
    case TG_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
    case TG_UINT8: lo = v == trunc(v) ? -255 : 0, hi = 255; break;
    default: return TG_OK;
    }
    if (v >= lo && v <= hi && !(dtype == TG_INT64 && v == hi)) return TG_OK;
    char buf[32]; /* the shortest %g that reads back as v: 1e+30, 2147483648 */
    for (int digits = 6; digits <= 17; digits++)
        if (snprintf(buf, sizeof buf, "%.*g", digits, v), strtod(buf, NULL) == v || v != v) break;
    return tg_error("%s: value %s cannot be converted to type %s without overflow", op, buf, tg_dtype_name(dtype));
}

/* Builds in a scope of its own so that a failure after allocation frees what was made. */
static tg_tensor *make_filled(const char *op, tg_shape shape, tg_opts opts, double value) {
    if (tg_check_fill_value(op, opts.dtype, value)) return NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *t = make(op, shape, opts);
        if (t && !tg_fill_values_(t, value)) result = tg_scope_return(t);
    }
    return result;
}

tg_tensor *tg_zeros(tg_shape shape, tg_opts opts) { return make_filled("tg_zeros", shape, opts, 0); }
tg_tensor *tg_ones(tg_shape shape, tg_opts opts) { return make_filled("tg_ones", shape, opts, 1); }
tg_tensor *tg_full(tg_shape shape, double value, tg_opts opts) { return make_filled("tg_full", shape, opts, value); }

static tg_opts opts_like(const tg_tensor *t) { return (tg_opts){.dtype = t->dtype, .device = t->storage->device}; }
tg_tensor *tg_empty_like(tg_tensor *like) {
    if (tg_unusable_(like)) return tg_error_unusable_input("tg_empty_like", like, 0), NULL;
    return make("tg_empty_like", like->shape, opts_like(like));
}
tg_tensor *tg_zeros_like(tg_tensor *like) {
    if (tg_unusable_(like)) return tg_error_unusable_input("tg_zeros_like", like, 0), NULL;
    return make_filled("tg_zeros_like", like->shape, opts_like(like), 0);
}
tg_tensor *tg_ones_like(tg_tensor *like) {
    if (tg_unusable_(like)) return tg_error_unusable_input("tg_ones_like", like, 0), NULL;
    return make_filled("tg_ones_like", like->shape, opts_like(like), 1);
}
tg_tensor *tg_full_like(tg_tensor *like, double value) {
    if (tg_unusable_(like)) return tg_error_unusable_input("tg_full_like", like, 0), NULL;
    return make_filled("tg_full_like", like->shape, opts_like(like), value);
}

tg_tensor *tg_arange(double start, double end, double step, tg_opts opts) {
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step))
        return tg_error("tg_arange: step must be non-zero and bounds finite (start %g, end %g, step %g)", start, end,
                        step),
               NULL;
    if ((end - start) * step < 0)
        return tg_error("tg_arange: step %g goes away from end (start %g, end %g)", step, start, end), NULL;
    /* The count is checked as a double: converting one past INT64_MAX is undefined. */
    double count = ceil((end - start) / step);
    if (!(count < 0x1p62))
        return tg_error("tg_arange: (end - start) / step gives %g elements, too many (start %g, end %g, step %g)",
                        count, start, end, step),
               NULL;
    int64_t n = (int64_t)count;
    if (tg_check_creation("tg_arange", TG_SHAPE(n), opts)) return NULL;
    if (n > 0 && (tg_check_fill_value("tg_arange", opts.dtype, start) ||
                  tg_check_fill_value("tg_arange", opts.dtype, start + (double)(n - 1) * step)))
        return NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *t = make("tg_arange", TG_SHAPE(n), (tg_opts){.dtype = opts.dtype});
        if (t) {
            size_t es = tg_dtype_size(t->dtype);
            for (int64_t i = 0; i < n; i++)
                tg_store_from_double((char *)t->storage->data + i * (int64_t)es, t->dtype, start + (double)i * step);
            result = tg_scope_return(tg_tensor_to(t, opts.device));
            if (result) result->requires_grad = opts.requires_grad;
        }
    }
    return result;
}

tg_tensor *tg_from_data(const void *data, tg_shape shape, tg_opts opts) {
    if (!data) return tg_error("tg_from_data: data is NULL"), NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *t = make("tg_from_data", shape, opts);
        if (t && !tg_copy_bytes(t->storage->data, t->storage->device, data, TG_CPU, t->storage->nbytes, "tg_from_data"))
            result = tg_scope_return(t);
    }
    return result;
}

/* ---- element copies ---- */

typedef struct {
    tg_dtype dst, src;
} cast_ctx;

/* float32 <-> bfloat16 / float16 rows (autocast's casts, every step): core/lowp.h's
 * conversions, vectorised by the clones when both rows are contiguous. */
TG_VECTOR_CLONES static void float_to_bf16_row(uint16_t *restrict d, const float *restrict s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = tg_float_to_bf16_bits(s[i]);
}
TG_VECTOR_CLONES static void bf16_to_float_row(float *restrict d, const uint16_t *restrict s, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = tg_bf16_bits_to_float(s[i]);
}

static bool low_precision_row(char **p, const int64_t *s, int64_t n, const cast_ctx *c) {
    bool contiguous = s[0] == (int64_t)tg_dtype_size(c->dst) && s[1] == (int64_t)tg_dtype_size(c->src);
    if (c->dst == TG_BFLOAT16 && c->src == TG_FLOAT32) {
        if (contiguous) float_to_bf16_row((uint16_t *)p[0], (const float *)p[1], n);
        else
            for (int64_t i = 0; i < n; i++)
                *(uint16_t *)(p[0] + i * s[0]) = tg_float_to_bf16_bits(*(const float *)(p[1] + i * s[1]));
        return true;
    }
    if (c->dst == TG_FLOAT32 && c->src == TG_BFLOAT16) {
        if (contiguous) bf16_to_float_row((float *)p[0], (const uint16_t *)p[1], n);
        else
            for (int64_t i = 0; i < n; i++)
                *(float *)(p[0] + i * s[0]) = tg_bf16_bits_to_float(*(const uint16_t *)(p[1] + i * s[1]));
        return true;
    }
    if (c->dst == TG_FLOAT16 && c->src == TG_FLOAT32) {
        for (int64_t i = 0; i < n; i++)
            *(uint16_t *)(p[0] + i * s[0]) = tg_float_to_half_bits(*(const float *)(p[1] + i * s[1]));
        return true;
    }
    if (c->dst == TG_FLOAT32 && c->src == TG_FLOAT16) {
        for (int64_t i = 0; i < n; i++)
            *(float *)(p[0] + i * s[0]) = tg_half_bits_to_float(*(const uint16_t *)(p[1] + i * s[1]));
        return true;
    }
    return false;
}

static void copy_row(char **p, const int64_t *s, int64_t n, void *vctx) {
    const cast_ctx *c = vctx;
    if (low_precision_row(p, s, n, c)) return;
    if (c->dst == c->src) {
        size_t es = tg_dtype_size(c->dst);
        if (s[0] == (int64_t)es && s[1] == (int64_t)es) {
            memcpy(p[0], p[1], (size_t)n * es);
            return;
        }
        /* Constant sizes let the compiler turn each memcpy into one load and store. */
#define TG_COPY_STRIDED(size) \
    for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * s[0], p[1] + i * s[1], size)
        switch (es) {
        case 4: TG_COPY_STRIDED(4); break;
        case 8: TG_COPY_STRIDED(8); break;
        case 1: TG_COPY_STRIDED(1); break;
        default: TG_COPY_STRIDED(es);
        }
#undef TG_COPY_STRIDED
        return;
    }
    if (c->dst == TG_FLOAT32 && c->src == TG_FLOAT64) {
        for (int64_t i = 0; i < n; i++) *(float *)(p[0] + i * s[0]) = (float)*(double *)(p[1] + i * s[1]);
        return;
    }
    if (c->dst == TG_INT64 && (c->src == TG_INT32 || c->src == TG_UINT8 || c->src == TG_BOOL)) {
        for (int64_t i = 0; i < n; i++) {
            const char *q = p[1] + i * s[1];
            int64_t v = c->src == TG_INT32   ? *(const int32_t *)q
                        : c->src == TG_UINT8 ? *(const uint8_t *)q
                                             : *(const bool *)q;
            *(int64_t *)(p[0] + i * s[0]) = v;
        }
        return;
    }
    for (int64_t i = 0; i < n; i++)
        tg_store_from_double(p[0] + i * s[0], c->dst, tg_load_as_double(p[1] + i * s[1], c->src));
}

static tg_status cpu_copy_strided(tg_tensor *dst, tg_tensor *src) {
    tg_iter it;
    tg_tensor *ops[2] = {dst, src};
    tg_iter_init(&it, &dst->shape, 2, ops);
    cast_ctx c = {dst->dtype, src->dtype};
    tg_iter_run(&it, copy_row, &c, true);
    return TG_OK;
}

tg_status tg_copy_values_(tg_tensor *dst, tg_tensor *src) {
    if (tg_unusable_(dst)) return tg_error_unusable_input("tg_copy_", dst, 0);
    if (tg_unusable_(src)) return tg_error_unusable_input("tg_copy_", src, 1);
    char a[128], b[128];
    tg_shape bshape;
    if (!tg_broadcast_shapes(dst->shape, src->shape, &bshape) || !tg_shape_equal(bshape, dst->shape))
        return tg_error("tg_copy_: source of shape %s cannot be broadcast to destination shape %s",
                        tg_shape_str(src->shape, a, sizeof a), tg_shape_str(dst->shape, b, sizeof b));
    tg_device dd = dst->storage->device, sd = src->storage->device;
    tg_status status;
    if (tg_device_equal(dd, sd)) {
        if (dd.kind == TG_DEVICE_CPU) {
            status = cpu_copy_strided(dst, src);
        } else {
            const tg_device_backend *be = tg_backend_for(dd, "tg_copy_");
            status = be ? be->copy_strided(dst, src) : TG_ERROR;
        }
    } else if (tg_is_contiguous(dst) && tg_is_contiguous(src) && dst->dtype == src->dtype &&
               tg_shape_equal(dst->shape, src->shape)) {
        status = tg_copy_bytes(tg_elem_ptr(dst), dd, tg_elem_ptr(src), sd,
                               (size_t)tg_numel(dst) * tg_dtype_size(dst->dtype), "tg_copy_");
    } else {
        /* Across devices with a cast, broadcast or strides: stage a contiguous copy of
         * src with dst's dtype and shape on src's device, move it, then copy in. */
        TG_SCOPE {
            tg_tensor *staged = make("tg_copy_", dst->shape, (tg_opts){.dtype = dst->dtype, .device = sd});
            tg_tensor *moved = staged && !tg_copy_values_(staged, src) ? tg_tensor_to(staged, dd) : NULL;
            status = moved ? tg_copy_values_(dst, moved) : TG_ERROR;
        }
        return status;
    }
    if (status == TG_OK) dst->storage->version++;
    return status;
}

typedef struct {
    float *d;
    float v;
} fill_f32_job;

static void fill_f32_chunk(int64_t begin, int64_t end, void *arg) {
    const fill_f32_job *j = arg;
    for (int64_t i = begin; i < end; i++) j->d[i] = j->v;
}

tg_status tg_fill_values_(tg_tensor *t, double value) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_fill_", t, 0);
    if (tg_check_fill_value("tg_fill_", t->dtype, value)) return TG_ERROR;
    if (t->storage->device.kind != TG_DEVICE_CPU) {
        const tg_device_backend *be = tg_backend_for(t->storage->device, "tg_fill_");
        if (!be || be->fill(t, value)) return TG_ERROR;
        t->storage->version++;
        return TG_OK;
    }
    /* One element converted, then copied everywhere through a broadcast view. */
    tg_storage one = {0};
    int64_t scalar_bits[1] = {0};
    tg_store_from_double(scalar_bits, t->dtype, value);
    one.data = scalar_bits;
    one.device = TG_CPU;
    tg_tensor src = {.life = TG_TENSOR_ALIVE, .storage = &one, .dtype = t->dtype, .refcount = 1};
    int64_t n = tg_numel(t);
    if (tg_is_contiguous(t) && t->dtype == TG_FLOAT32) {
        fill_f32_job j = {tg_elem_ptr(t), (float)value};
        tg_parallel_for(n, TG_PARALLEL_GRAIN, fill_f32_chunk, &j);
    } else if (tg_is_contiguous(t) && value == 0) {
        memset(tg_elem_ptr(t), 0, (size_t)n * tg_dtype_size(t->dtype));
    } else {
        cpu_copy_strided(t, &src);
    }
    t->storage->version++;
    return TG_OK;
}

tg_status tg_copy_to_host(tg_tensor *t, void *dst, size_t nbytes) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_copy_to_host", t, 0);
    size_t want = (size_t)tg_numel(t) * tg_dtype_size(t->dtype);
    if (nbytes != want) {
        char buf[128];
        return tg_error("tg_copy_to_host: buffer of %zu bytes given for a %s tensor of shape %s (%zu bytes)", nbytes,
                        tg_dtype_name(t->dtype), tg_shape_str(t->shape, buf, sizeof buf), want);
    }
    if (!dst && want) return tg_error("tg_copy_to_host: destination is NULL");
    tg_status status = TG_ERROR;
    TG_SCOPE {
        tg_tensor *c = tg_is_contiguous(t) ? t : tg_clone_values(t);
        if (c) status = tg_copy_bytes(dst, TG_CPU, tg_elem_ptr(c), c->storage->device, want, "tg_copy_to_host");
    }
    return status;
}

double tg_item(tg_tensor *t) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_item", t, 0), NAN;
    if (tg_numel(t) != 1) {
        char buf[128];
        tg_error("tg_item: a tensor with %lld elements (shape %s) cannot be converted to a scalar",
                 (long long)tg_numel(t), tg_shape_str(t->shape, buf, sizeof buf));
        return NAN;
    }
    int64_t bits = 0;
    if (t->storage->device.kind == TG_DEVICE_CPU) return tg_load_as_double(tg_elem_ptr(t), t->dtype);
    if (tg_copy_bytes(&bits, TG_CPU, tg_elem_ptr(t), t->storage->device, tg_dtype_size(t->dtype), "tg_item"))
        return NAN;
    return tg_load_as_double(&bits, t->dtype);
}

tg_tensor *tg_clone_values(tg_tensor *t) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_clone", t, 0), NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *c = make("tg_clone", t->shape, opts_like(t));
        if (c && !tg_copy_values_(c, t)) result = tg_scope_return(c);
    }
    return result;
}

tg_tensor *tg_empty_strided_like(tg_tensor *like) {
    if (tg_unusable_(like)) return tg_error_unusable_input("tg_empty_like", like, 0), NULL;
    if (!tg_is_non_overlapping_and_dense(like)) return make("tg_empty_like", like->shape, opts_like(like));
    tg_opts opts = opts_like(like);
    if (tg_check_creation("tg_empty_like", like->shape, opts)) return NULL;
    tg_storage *s = tg_storage_new((size_t)tg_numel(like) * tg_dtype_size(like->dtype), opts.device, "tg_empty_like");
    return s ? tg_tensor_wrap(s, like->dtype, like->shape, like->strides, 0) : NULL;
}

tg_tensor *tg_tensor_to(tg_tensor *t, tg_device device) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_to", t, 0), NULL;
    if (tg_device_equal(t->storage->device, device)) return tg_scope_track(tg_retain(t));
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *c = make("tg_to", t->shape, (tg_opts){.dtype = t->dtype, .device = device});
        if (c && !tg_copy_values_(c, t)) {
            c->requires_grad = t->requires_grad && !t->grad_fn;
            result = tg_scope_return(c);
        }
    }
    return result;
}

/* ---- views ---- */

static int64_t max_abs_stride(int ndim, const int64_t *strides) {
    int64_t m = 0;
    for (int i = 0; i < ndim; i++)
        m = strides[i] == INT64_MIN ? INT64_MAX : llabs(strides[i]) > m ? llabs(strides[i]) : m;
    return m;
}

/* Every view is made here: its geometry checked for overflow and against the
 * storage, so no view can address memory outside it. */
tg_tensor *tg_make_view(const char *op, tg_tensor *t, tg_shape shape, const int64_t *strides, int64_t offset) {
    char buf[128];
    if (shape.ndim < 0 || shape.ndim > TG_MAX_DIMS)
        return tg_error("%s: %d dims requested, at most %d are supported", op, shape.ndim, TG_MAX_DIMS), NULL;
    if (tg_check_creation(op, shape, (tg_opts){.dtype = t->dtype})) return NULL;
    if (offset < 0) return tg_error("%s: negative storage offset %lld", op, (long long)offset), NULL;
    int64_t lo = offset, hi = offset, capacity = (int64_t)(t->storage->nbytes / tg_dtype_size(t->dtype));
    bool overflow = false;
    for (int i = 0; i < shape.ndim && tg_shape_numel(shape) > 0; i++) {
        int64_t span;
        overflow |= __builtin_mul_overflow(shape.dims[i] - 1, strides[i], &span);
        overflow |= span < 0 ? __builtin_add_overflow(lo, span, &lo) : __builtin_add_overflow(hi, span, &hi);
    }
    if (overflow)
        return tg_error("%s: view of shape %s with strides up to %lld overflows the address range", op,
                        tg_shape_str(shape, buf, sizeof buf), (long long)max_abs_stride(shape.ndim, strides)),
               NULL;
    /* An empty view reaches no element, so any offset is in bounds, as PyTorch's (the
     * backward of narrow/select/diagonal/pad over an empty input makes such views);
     * one so large that the address would wrap is still refused. */
    if (tg_shape_numel(shape) > 0 ? lo < 0 || hi >= capacity : offset > INT64_MAX / 64)
        return tg_error("%s: view of shape %s at offset %lld reaches elements [%lld, %lld] outside the "
                        "storage of %lld elements",
                        op, tg_shape_str(shape, buf, sizeof buf), (long long)offset, (long long)lo, (long long)hi,
                        (long long)capacity),
               NULL;
    tg_storage_retain(t->storage);
    return tg_tensor_wrap(t->storage, t->dtype, shape, strides, offset);
}

tg_tensor *tg_as_strided(tg_tensor *t, tg_shape shape, const int64_t *strides, int64_t offset) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_as_strided", t, 0), NULL;
    if (!strides) return tg_error("tg_as_strided: strides is NULL"), NULL;
    return tg_make_view("tg_as_strided", t, shape, strides, offset);
}

tg_tensor *tg_detach(tg_tensor *t) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_detach", t, 0), NULL;
    tg_storage_retain(t->storage);
    return tg_tensor_wrap(t->storage, t->dtype, t->shape, t->strides, t->offset);
}

/* ---- properties ---- */

tg_shape tg_shape_of(const tg_tensor *t) { return t->shape; }
int tg_ndim(const tg_tensor *t) { return t->shape.ndim; }
int64_t tg_size(const tg_tensor *t, int dim) {
    int d = tg_wrap_dim(dim, t->shape.ndim);
    if (d < 0 || t->shape.ndim == 0) {
        tg_error("tg_size: dim %d out of range for a tensor with %d dims", dim, t->shape.ndim);
        return -1;
    }
    return t->shape.dims[d];
}
int64_t tg_numel(const tg_tensor *t) { return tg_shape_numel(t->shape); }
int64_t tg_stride(const tg_tensor *t, int dim) {
    int d = tg_wrap_dim(dim, t->shape.ndim);
    if (d < 0 || t->shape.ndim == 0) {
        tg_error("tg_stride: dim %d out of range for a tensor with %d dims", dim, t->shape.ndim);
        return -1;
    }
    return t->strides[d];
}
const int64_t *tg_strides(const tg_tensor *t) { return t->strides; }
int64_t tg_offset(const tg_tensor *t) { return t->offset; }
tg_dtype tg_dtype_of(const tg_tensor *t) { return t->dtype; }
tg_device tg_device_of(const tg_tensor *t) {
    if (t && t->life != TG_TENSOR_ALIVE) return tg_error_unusable_input("tg_device_of", t, 0), TG_CPU;
    return t->storage->device;
}
void *tg_data_ptr(tg_tensor *t) {
    if (t && t->life != TG_TENSOR_ALIVE) return tg_error_unusable_input("tg_data_ptr", t, 0), NULL;
    return t ? tg_elem_ptr(t) : NULL;
}
uint64_t tg_version(const tg_tensor *t) { return t->storage->version; }
void tg_bump_version(tg_tensor *t) { t->storage->version++; }
bool tg_same_storage(const tg_tensor *a, const tg_tensor *b) { return a->storage == b->storage; }

bool tg_is_contiguous(const tg_tensor *t) {
    int64_t expected = 1;
    for (int i = t->shape.ndim - 1; i >= 0; i--) {
        if (t->shape.dims[i] == 1) continue;
        if (t->strides[i] != expected) return false;
        expected *= t->shape.dims[i];
    }
    return true;
}

bool tg_is_non_overlapping_and_dense(const tg_tensor *t) {
    /* Dims sorted by stride (size-1 dims ignored) must step as a contiguous tensor's. */
    int order[TG_MAX_DIMS], n = 0;
    for (int i = 0; i < t->shape.ndim; i++)
        if (t->shape.dims[i] != 1) order[n++] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t->strides[order[j - 1]] > t->strides[order[j]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    int64_t expected = 1;
    for (int i = 0; i < n; i++) {
        if (t->strides[order[i]] != expected) return false;
        expected *= t->shape.dims[order[i]];
    }
    return true;
}

bool tg_has_internal_overlap(const tg_tensor *t) {
    for (int i = 0; i < t->shape.ndim; i++)
        if (t->shape.dims[i] > 1 && t->strides[i] == 0) return true;
    return false;
}

/* The elements [lo, hi] of the storage that t can reach (lo > hi when empty). */
static void reach(const tg_tensor *t, int64_t *lo, int64_t *hi) {
    *lo = *hi = t->offset;
    if (tg_numel(t) == 0) {
        *hi = *lo - 1;
        return;
    }
    for (int i = 0; i < t->shape.ndim; i++) {
        int64_t span = (t->shape.dims[i] - 1) * t->strides[i]; /* bounded: views are checked */
        if (span < 0) *lo += span;
        else *hi += span;
    }
}

tg_overlap tg_overlap_of(const tg_tensor *a, const tg_tensor *b) {
    if (a->storage != b->storage || tg_numel(a) == 0 || tg_numel(b) == 0) return TG_OVERLAP_NONE;
    if (a->offset == b->offset && tg_shape_equal(a->shape, b->shape) && a->dtype == b->dtype) {
        bool same = true;
        for (int i = 0; i < a->shape.ndim; i++) same &= a->shape.dims[i] == 1 || a->strides[i] == b->strides[i];
        if (same) return TG_OVERLAP_FULL;
    }
    int64_t alo, ahi, blo, bhi;
    reach(a, &alo, &ahi);
    reach(b, &blo, &bhi);
    if (ahi < blo || bhi < alo) return TG_OVERLAP_NONE;
    /* Two dense tensors whose ranges meet share elements (PyTorch's rule). */
    if (tg_is_non_overlapping_and_dense(a) && tg_is_non_overlapping_and_dense(b)) return TG_OVERLAP_PARTIAL;
    return TG_OVERLAP_MAYBE;
}
