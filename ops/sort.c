/* sort, argsort, topk, kthvalue, median (see ops/sort.h): the order comes from
 * ops/sort_line.h on either device (CUDA: ops/cuda/sort.cu), everything after it is
 * gather, narrow and where, so gradients come from gather. */
#include "ops/sort.h"

#include <math.h>
#include <stdlib.h>

#include "core/parallel.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/cuda/sort.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/reduce_plan.h"
#include "ops/shape.h"
#include "ops/sort_line.h"

typedef struct {
    tg_reduce_plan px, po;
    tg_tensor *order, *x;
    bool descending;
} sort_job;

/* Lines [lo, hi) of a sort: each line's order into a scratch of the chunk's own. */
static void sort_lines(int64_t lo, int64_t hi, void *arg) {
    const sort_job *j = arg;
    tg_tensor *x = j->x;
    bool descending = j->descending;
    int64_t len = j->px.inner_numel, xs = j->px.inner_ndim ? j->px.inner_strides[0] : 1;
    int64_t os = j->po.inner_ndim ? j->po.inner_strides[0] : 1;
    int64_t *line = malloc((size_t)(2 * len) * sizeof *line), *tmp = line + len;
    TG_ASSERT(line != NULL);
    for (int64_t o = lo; o < hi; o++) {
        int64_t xo = tg_reduce_outer_offset(&j->px, o);
        switch (x->dtype) {
        case TG_FLOAT32: TG_SORT_LINE(float, (const float *)tg_elem_ptr(x) + xo, xs, line, tmp, len, descending); break;
        case TG_FLOAT64:
            TG_SORT_LINE(double, (const double *)tg_elem_ptr(x) + xo, xs, line, tmp, len, descending);
            break;
        case TG_INT64:
            TG_SORT_LINE(int64_t, (const int64_t *)tg_elem_ptr(x) + xo, xs, line, tmp, len, descending);
            break;
        case TG_INT32:
            TG_SORT_LINE(int32_t, (const int32_t *)tg_elem_ptr(x) + xo, xs, line, tmp, len, descending);
            break;
        default: /* uint8 and bool: one byte, false < true */
            TG_SORT_LINE(uint8_t, (const uint8_t *)tg_elem_ptr(x) + xo, xs, line, tmp, len, descending);
            break;
        }
        int64_t *dst = (int64_t *)tg_elem_ptr(j->order) + tg_reduce_outer_offset(&j->po, o);
        for (int64_t k = 0; k < len; k++) dst[k * os] = line[k];
    }
    free(line);
}

/* Every line sorted on its own, so lines are split over the thread pool (a chunk's
 * result does not depend on who sorts it). */
static void cpu_sort_order(tg_tensor *order, tg_tensor *x, int dim, bool descending) {
    sort_job j = {.order = order, .x = x, .descending = descending};
    int64_t lines = tg_line_plans(x, order, dim, &j.px, &j.po), len = j.px.inner_numel;
    if (lines == 0) return;
    int64_t grain = len >= 32768 ? 1 : 32768 / len; /* about 32k elements per chunk */
    tg_parallel_for(lines, grain, sort_lines, &j);
}

/* int64 [x's shape]: the stable sort order of every line along dim (x has dims). */
static tg_tensor *sort_order(const char *op, tg_tensor *x, int dim, bool descending) {
    if (x->dtype == TG_FLOAT16 || x->dtype == TG_BFLOAT16)
        return tg_error("%s: not implemented for %s", op, tg_dtype_name(x->dtype)), NULL;
    tg_opts o = {.dtype = TG_INT64, .device = x->storage->device};
    tg_tensor *order = tg_empty(x->shape, o);
    if (!order || tg_numel(x) == 0) return order;
    if (x->storage->device.kind == TG_DEVICE_CPU) {
        cpu_sort_order(order, x, dim, descending);
        return order;
    }
    tg_tensor *scratch = tg_empty(TG_SHAPE(2 * tg_numel(x)), o);
    return scratch && !TG_CUDA_CALL(op, tg_cuda_sort_order, order, x, dim, descending, scratch) ? order : NULL;
}

/* The shared front: checks x and dim; a 0-dim x is viewed as [1] (*scalar set). */
static tg_tensor *as_lines(const char *op, tg_tensor *x, int dim, int *d, bool *scalar) {
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), NULL;
    *scalar = x->shape.ndim == 0;
    *d = tg_wrap_dim(dim, *scalar ? 1 : x->shape.ndim);
    if (*d < 0) return tg_error("%s: dim %d out of range for a tensor with %d dims", op, dim, x->shape.ndim), NULL;
    return *scalar ? tg_reshape(x, TG_SHAPE(1)) : x;
}

/* Positions [first, first + count) of every line, as an int64 tensor shaped for gather. */
static tg_tensor *positions(tg_tensor *x, int d, int64_t first, int64_t count) {
    tg_shape s = x->shape;
    for (int i = 0; i < s.ndim; i++) s.dims[i] = i == d ? count : 1;
    tg_tensor *p = tg_reshape(tg_arange((double)first, (double)(first + count), 1,
                                        (tg_opts){.dtype = TG_INT64, .device = x->storage->device}),
                              s);
    tg_shape full = x->shape;
    full.dims[d] = count;
    return tg_expand(p, full);
}

/* The lower median's position per line: (n - 1) / 2, or that of the first NaN (at
 * n - #NaN in ascending order) when the line has one. */
static tg_tensor *median_positions(tg_tensor *x, int d) {
    int64_t n = x->shape.dims[d];
    tg_tensor *nans = tg_sum_dim(tg_cast(tg_ne(x, x), TG_INT64), d, true);
    return tg_where(tg_gt_scalar(nans, 0), tg_rsub_scalar(nans, (double)n), tg_full_like(nans, (double)((n - 1) / 2)));
}

typedef enum { PICK_ALL, PICK_RANGE, PICK_MEDIAN } pick_kind;

/* sort, topk, kthvalue and median_dim: the order, the positions picked from it
 * (all, [first, first + count), or the median), the indices there and the values
 * gathered from x; the picked dim squeezed unless keepdim (never for ALL / RANGE). */
static tg_tensor *ordered(const char *op, tg_tensor *x, int dim, bool descending, pick_kind pick, int64_t first,
                          int64_t count, bool squeeze, tg_tensor **indices) {
    int d;
    bool scalar;
    tg_tensor *values = NULL;
    if (indices) *indices = NULL;
    TG_SCOPE {
        tg_tensor *lines = as_lines(op, x, dim, &d, &scalar);
        tg_tensor *order = lines ? sort_order(op, lines, d, descending) : NULL;
        tg_tensor *idx = order;
        if (order && pick == PICK_RANGE) idx = tg_gather(order, d, positions(lines, d, first, count));
        if (order && pick == PICK_MEDIAN) idx = tg_gather(order, d, median_positions(lines, d));
        tg_tensor *vals = idx ? tg_gather(lines, d, idx) : NULL;
        if (vals && scalar) { /* back to 0-dim */
            vals = tg_reshape(vals, TG_SCALAR_SHAPE);
            idx = tg_reshape(idx, TG_SCALAR_SHAPE);
        } else if (vals && squeeze) {
            vals = tg_squeeze(vals, d);
            idx = tg_squeeze(idx, d);
        }
        if (vals && idx) {
            values = tg_scope_return(vals);
            if (indices) *indices = tg_scope_return(idx);
        }
    }
    return values;
}

/* The size of x along dim for the range checks (1 for a 0-dim x), or -1 after an error. */
static int64_t line_length(const char *op, tg_tensor *x, int dim) {
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), -1;
    int d = tg_wrap_dim(dim, x->shape.ndim ? x->shape.ndim : 1);
    if (d < 0) return tg_error("%s: dim %d out of range for a tensor with %d dims", op, dim, x->shape.ndim), -1;
    return x->shape.ndim ? x->shape.dims[d] : 1;
}

tg_tensor *tg_sort(tg_tensor *x, int dim, bool descending, tg_tensor **indices) {
    return ordered("tg_sort", x, dim, descending, PICK_ALL, 0, 0, false, indices);
}

tg_tensor *tg_argsort(tg_tensor *x, int dim, bool descending) {
    tg_tensor *indices = NULL;
    TG_SCOPE { /* the values stay in this scope */
        tg_tensor *idx = NULL;
        if (ordered("tg_argsort", x, dim, descending, PICK_ALL, 0, 0, false, &idx)) indices = tg_scope_return(idx);
    }
    return indices;
}

tg_tensor *tg_topk(tg_tensor *x, int64_t k, int dim, bool largest, bool sorted, tg_tensor **indices) {
    const char *op = "tg_topk";
    if (indices) *indices = NULL;
    int64_t n = line_length(op, x, dim);
    if (n < 0) return NULL;
    if (k < 0 || k > n)
        return tg_error("%s: k %lld out of range for dim %d of size %lld (0 <= k <= size)", op, (long long)k, dim,
                        (long long)n),
               NULL;
    (void)sorted; /* always sorted: one of the orders sorted=false allows */
    return ordered(op, x, dim, largest, PICK_RANGE, 0, k, false, indices);
}

tg_tensor *tg_kthvalue(tg_tensor *x, int64_t k, int dim, bool keepdim, tg_tensor **indices) {
    const char *op = "tg_kthvalue";
    if (indices) *indices = NULL;
    int64_t n = line_length(op, x, dim);
    if (n < 0) return NULL;
    if (k < 1 || k > n)
        return tg_error("%s: k %lld out of range for dim %d of size %lld (1 <= k <= size)", op, (long long)k, dim,
                        (long long)n),
               NULL;
    return ordered(op, x, dim, false, PICK_RANGE, k - 1, 1, !keepdim, indices);
}

tg_tensor *tg_median_dim(tg_tensor *x, int dim, bool keepdim, tg_tensor **indices) {
    const char *op = "tg_median_dim";
    if (indices) *indices = NULL;
    int64_t n = line_length(op, x, dim);
    if (n < 0) return NULL;
    if (n == 0) return tg_error("%s: cannot take the median over dim %d of size 0", op, dim), NULL;
    return ordered(op, x, dim, false, PICK_MEDIAN, 0, 0, !keepdim, indices);
}

tg_tensor *tg_median(tg_tensor *x) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_median", x, 0), NULL;
    if (tg_numel(x) == 0) {
        if (!tg_dtype_is_floating(x->dtype))
            return tg_error("tg_median: an empty %s tensor has no median", tg_dtype_name(x->dtype)), NULL;
        return tg_full(TG_SCALAR_SHAPE, NAN, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    }
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *flat = tg_reshape(x, TG_SHAPE(tg_numel(x)));
        if (flat) result = tg_scope_return(ordered("tg_median", flat, 0, false, PICK_MEDIAN, 0, 0, true, NULL));
    }
    return result;
}
