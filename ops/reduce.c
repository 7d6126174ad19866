/* Reductions: sum and mean (definitions, gradients and CPU kernels). max/min/argmax:
 * ops/reduce_extrema.c; var/std/logsumexp/norm: ops/reduce_stats.c; softmax: ops/softmax.c.
 * CUDA kernels: ops/cuda/reduce.cu. */
#include "ops/reduce.h"

#include <stdlib.h>

#include "autograd/function.h"
#include "core/lowp.h"
#include "core/parallel.h"
#include "core/scope.h"
#include "ops/cuda/reduce.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce_dims.h"
#include "ops/reduce_plan.h"
#include "ops/shape.h"
#include "core/tensor_impl.h"

typedef struct {
    bool reduce[TG_MAX_DIMS];
    bool keepdim;
} reduce_args;

/* out[o] = sum over the reduced dims, accumulated in double (LOAD widens an element,
 * STORE rounds a sum to T: bfloat16 and float16 are read as they are, with the bits of
 * summing a float32 copy and rounding the float32 result). Three layouts:
 * - columns: leading dims reduced, trailing ones kept and contiguous (bias gradients,
 *   [N, C] -> [C]): rows are added into a row of accumulators, memory read in order;
 * - rows: one reduced dim per output (contiguous or strided);
 * - general: the last reduced dim is walked as a row, the others by offset.
 * Each output is summed by one thread in one order, so the result does not depend on
 * the number of threads. */
#define SUM_KERNEL(NAME, T, ACC, LOAD, STORE)                                               \
    typedef struct {                                                                        \
        const tg_reduce_plan *p;                                                            \
        const T *x;                                                                         \
        T *out;                                                                             \
        ACC *acc;                                                                           \
    } NAME##_job;                                                                           \
    /* Columns [c0, c1) in blocks of 256 (block b covers columns 256b ..). */               \
    static void NAME##_cols(int64_t b0, int64_t b1, void *arg) {                            \
        const NAME##_job *j = arg;                                                          \
        int64_t cols = j->p->outer_numel, inner = j->p->inner_numel, st = j->p->inner_strides[0]; \
        for (int64_t b = b0; b < b1; b++) {                                                 \
            int64_t c0 = b * 256, c1 = c0 + 256 < cols ? c0 + 256 : cols;                   \
            for (int64_t r = 0; r < inner; r++) {                                           \
                const T *row = j->x + r * st;                                               \
                for (int64_t c = c0; c < c1; c++) j->acc[c] += LOAD(row[c]);                \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
    static void NAME##_rows(int64_t o0, int64_t o1, void *arg) {                            \
        const NAME##_job *j = arg;                                                          \
        const tg_reduce_plan *p = j->p;                                                     \
        int64_t inner = p->inner_numel;                                                     \
        bool unit = p->inner_ndim == 1 && p->inner_strides[0] == 1;                         \
        for (int64_t o = o0; o < o1; o++) {                                                 \
            const T *base = j->x + tg_reduce_outer_offset(p, o);                            \
            ACC acc = 0;                                                                    \
            if (unit || p->inner_ndim == 0) { /* 0: only size-1 dims were reduced */        \
                for (int64_t k = 0; k < inner; k++) acc += LOAD(base[k]);                   \
            } else if (p->inner_ndim == 1) {                                                \
                int64_t st = p->inner_strides[0];                                           \
                for (int64_t k = 0; k < inner; k++) acc += LOAD(base[k * st]);              \
            } else {                                                                        \
                int last = p->inner_ndim - 1;                                               \
                int64_t len = p->inner_shape[last], st = p->inner_strides[last];            \
                for (int64_t r = 0; r < inner; r += len) {                                  \
                    const T *row = base + tg_reduce_inner_offset(p, r);                     \
                    for (int64_t k = 0; k < len; k++) acc += LOAD(row[k * st]);             \
                }                                                                           \
            }                                                                               \
            j->out[o] = STORE(acc);                                                         \
        }                                                                                   \
    }                                                                                       \
    static void NAME(const tg_reduce_plan *p, const T *x, T *out) {                         \
        int64_t inner = p->inner_numel;                                                     \
        NAME##_job j = {p, x, out, NULL};                                                   \
        if (p->outer_ndim == 1 && p->outer_strides[0] == 1 && p->inner_ndim == 1 &&         \
            p->outer_numel > 1) {                                                           \
            int64_t cols = p->outer_numel, blocks = (cols + 255) / 256;                     \
            j.acc = calloc((size_t)cols, sizeof(ACC));                                      \
            TG_ASSERT(j.acc != NULL);                                                       \
            bool par = cols * inner >= TG_REDUCE_GRAIN && cols >= 256;                      \
            tg_parallel_for(blocks, par ? 1 : blocks, NAME##_cols, &j);                     \
            for (int64_t c = 0; c < cols; c++) out[c] = STORE(j.acc[c]);                    \
            free(j.acc);                                                                    \
            return;                                                                         \
        }                                                                                   \
        int64_t outer = p->outer_numel;                                                     \
        bool par = outer * inner >= TG_REDUCE_GRAIN && outer > 1;                           \
        tg_parallel_for(outer, par ? 1 : outer, NAME##_rows, &j);                           \
    }
#define TG_REDUCE_GRAIN 32768
#define AS_IS(v) (v)
#define TO_FLOAT(a) ((float)(a))
#define TO_BF16(a) tg_float_to_bf16_bits((float)(a))
#define TO_HALF(a) tg_float_to_half_bits((float)(a))
SUM_KERNEL(sum_f32, float, double, AS_IS, TO_FLOAT)
SUM_KERNEL(sum_f64, double, double, AS_IS, AS_IS)
SUM_KERNEL(sum_i64, int64_t, int64_t, AS_IS, AS_IS)
SUM_KERNEL(sum_bf16, uint16_t, double, tg_bf16_bits_to_float, TO_BF16)
SUM_KERNEL(sum_f16, uint16_t, double, tg_half_bits_to_float, TO_HALF)

/* A full sum of a long contiguous float32 run: partial sums (in double) of fixed blocks
 * of TG_REDUCE_GRAIN elements, the blocks split across threads, the partials added in
 * block order. The same blocks for any number of threads: the same result. */
typedef struct {
    const float *x;
    int64_t n;
    double *partial;
} sum_all_job;

static void sum_all_blocks(int64_t b0, int64_t b1, void *arg) {
    const sum_all_job *j = arg;
    for (int64_t b = b0; b < b1; b++) {
        int64_t i0 = b * TG_REDUCE_GRAIN, i1 = i0 + TG_REDUCE_GRAIN < j->n ? i0 + TG_REDUCE_GRAIN : j->n;
        double total = 0;
        for (int64_t i = i0; i < i1; i++) total += j->x[i];
        j->partial[b] = total;
    }
}

static double sum_f32_all(const float *x, int64_t n) {
    int64_t blocks = (n + TG_REDUCE_GRAIN - 1) / TG_REDUCE_GRAIN;
    if (blocks <= 1) {
        double total = 0;
        for (int64_t i = 0; i < n; i++) total += x[i];
        return total;
    }
    double stack[256], *partial = blocks <= 256 ? stack : malloc((size_t)blocks * sizeof(double));
    TG_ASSERT(partial != NULL);
    sum_all_job j = {x, n, partial};
    tg_parallel_for(blocks, 1, sum_all_blocks, &j);
    double total = 0;
    for (int64_t b = 0; b < blocks; b++) total += partial[b];
    if (partial != stack) free(partial);
    return total;
}

static tg_tensor *sum_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const reduce_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    tg_dtype dtype = tg_dtype_is_floating(x->dtype) ? x->dtype : TG_INT64;
    /* float16 / bfloat16: CUDA's kernel reads them as they are, and so does the CPU's, as
     * if it summed a float32 copy (in double) and rounded the float32 result once; a full
     * sum of a contiguous run sums such a copy (its blocked kernel is float32's). */
    tg_reduce_plan p;
    tg_reduce_plan_init(&p, x, a->reduce);
    bool full_run = p.outer_numel == 1 && p.inner_ndim == 1 && p.inner_strides[0] == 1;
    bool widen = tg_dtype_is_low_precision(dtype) && x->storage->device.kind == TG_DEVICE_CPU && full_run;
    if (widen) dtype = TG_FLOAT32;
    if (x->dtype != dtype && !(x = tg_cast(x, dtype))) return NULL;
    tg_shape shape = tg_reduced_shape(x->shape, a->reduce, a->keepdim);
    tg_tensor *out = tg_empty(shape, (tg_opts){.dtype = dtype, .device = x->storage->device});
    if (!out) return NULL;
    if (x->storage->device.kind == TG_DEVICE_CUDA) {
        if (TG_CUDA_CALL("tg_sum", tg_cuda_sum, out, x, a->reduce)) return NULL;
        return out;
    }
    if (x != in[0]) tg_reduce_plan_init(&p, x, a->reduce); /* the copy's strides */
    if (dtype == TG_BFLOAT16)
        sum_bf16(&p, tg_data_ptr(x), tg_data_ptr(out));
    else if (dtype == TG_FLOAT16)
        sum_f16(&p, tg_data_ptr(x), tg_data_ptr(out));
    else if (dtype == TG_FLOAT32 && full_run)
        *(float *)tg_data_ptr(out) = (float)sum_f32_all(tg_data_ptr(x), p.inner_numel);
    else if (dtype == TG_FLOAT32)
        sum_f32(&p, tg_data_ptr(x), tg_data_ptr(out));
    else if (dtype == TG_FLOAT64)
        sum_f64(&p, tg_data_ptr(x), tg_data_ptr(out));
    else
        sum_i64(&p, tg_data_ptr(x), tg_data_ptr(out));
    return widen ? tg_cast(out, in[0]->dtype) : out;
}

/* The gradient of a sum: g with the reduced dims put back (size 1), expanded. */
static tg_tensor *unreduce(tg_tensor *g, tg_shape input_shape, const reduce_args *a) {
    tg_tensor *k = a->keepdim ? g : tg_reshape(g, tg_reduced_shape(input_shape, a->reduce, true));
    return tg_expand(k, input_shape);
}

static void sum_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    grad_in[0] = unreduce(g, tg_ctx_input_shape(ctx, 0), tg_ctx_attrs(ctx));
}

static const tg_function sum_fn = {
    .name = "sum", .num_inputs = 1, .forward = sum_forward, .backward = sum_backward,
    .low_precision = TG_LOW_PRECISION_NATIVE, .autocast = TG_AUTOCAST_FLOAT32_ON_CUDA};

tg_tensor *tg_sum_dims(tg_tensor *t, const int *dims, int num_dims, bool keepdim) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_sum", t, 0), NULL;
    reduce_args a = {.keepdim = keepdim};
    if (tg_reduce_dims_mask("tg_sum", t, dims, num_dims, a.reduce)) return NULL;
    return tg_apply_args(&sum_fn, &t, &a, sizeof a);
}

tg_tensor *tg_sum(tg_tensor *t) { return tg_sum_dims(t, NULL, 0, false); }
tg_tensor *tg_sum_dim(tg_tensor *t, int dim, bool keepdim) { return tg_sum_dims(t, &dim, 1, keepdim); }

tg_tensor *tg_mean_dims(tg_tensor *t, const int *dims, int num_dims, bool keepdim) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_mean", t, 0), NULL;
    if (!tg_dtype_is_floating(t->dtype))
        return tg_error("tg_mean: expected a floating-point tensor, got %s", tg_dtype_name(t->dtype)), NULL;
    bool mask[TG_MAX_DIMS];
    if (tg_reduce_dims_mask("tg_mean", t, dims, num_dims, mask)) return NULL;
    int64_t count = 1;
    for (int d = 0; d < t->shape.ndim; d++)
        if (mask[d]) count *= t->shape.dims[d];
    tg_tensor *result = NULL;
    TG_SCOPE { result = tg_scope_return(tg_div_scalar(tg_sum_dims(t, dims, num_dims, keepdim), (double)count)); }
    return result;
}

tg_tensor *tg_mean(tg_tensor *t) { return tg_mean_dims(t, NULL, 0, false); }
tg_tensor *tg_mean_dim(tg_tensor *t, int dim, bool keepdim) { return tg_mean_dims(t, &dim, 1, keepdim); }

tg_tensor *tg_sum_to(tg_tensor *t, tg_shape shape) {
    if (tg_unusable_(t)) return tg_error_unusable_input("tg_sum_to", t, 0), NULL;
    tg_shape b;
    char s1[128], s2[128];
    if (!tg_broadcast_shapes(shape, t->shape, &b) || !tg_shape_equal(b, t->shape))
        return tg_error("tg_sum_to: shape %s does not broadcast to %s", tg_shape_str(shape, s1, sizeof s1),
                        tg_shape_str(t->shape, s2, sizeof s2)), NULL;
    if (tg_shape_equal(shape, t->shape)) return tg_scope_track(tg_retain(t));
    int lead = t->shape.ndim - shape.ndim, dims[TG_MAX_DIMS], n = 0;
    for (int d = 0; d < t->shape.ndim; d++)
        if (d < lead || (shape.dims[d - lead] == 1 && t->shape.dims[d] != 1)) dims[n++] = d;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *s = n ? tg_sum_dims(t, dims, n, true) : t;
        result = tg_scope_return(tg_reshape(s, shape));
    }
    return result;
}
