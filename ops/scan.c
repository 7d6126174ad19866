/* cumsum, cumprod and prod (see ops/scan.h): the CPU loop runs ops/scan_line.h's
 * formula, the CUDA kernel the same; the gradients are composed of flip, cat, cumsum
 * and cumprod themselves, so they differentiate again on either device. */
#include "ops/scan.h"

#include "autograd/function.h"
#include "core/parallel.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/composite.h"
#include "ops/cuda/scan.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/rearrange.h"
#include "ops/reduce.h"
#include "ops/reduce_plan.h"
#include "ops/scan_line.h"
#include "ops/shape.h"
#include "ops/slice.h"

typedef struct {
    tg_scan_kind kind;
    tg_reduce_plan px, po;
    tg_tensor *out, *x;
} scan_job;

static void scan_lines(int64_t lo, int64_t hi, void *arg) {
    const scan_job *j = arg;
    tg_scan_kind kind = j->kind;
    tg_tensor *x = j->x, *out = j->out;
    int64_t len = j->px.inner_numel, xs = j->px.inner_ndim ? j->px.inner_strides[0] : 1;
    int64_t os = j->po.inner_ndim ? j->po.inner_strides[0] : 1;
    for (int64_t o = lo; o < hi; o++) {
        int64_t xo = tg_reduce_outer_offset(&j->px, o), oo = tg_reduce_outer_offset(&j->po, o);
        switch (x->dtype) {
        case TG_FLOAT32:
            TG_SCAN_LINE(kind, float, double, (const float *)tg_elem_ptr(x) + xo, xs, (float *)tg_elem_ptr(out) + oo,
                         os, len);
            break;
        case TG_FLOAT64:
            TG_SCAN_LINE(kind, double, double, (const double *)tg_elem_ptr(x) + xo, xs, (double *)tg_elem_ptr(out) + oo,
                         os, len);
            break;
        default:
            TG_SCAN_LINE(kind, int64_t, int64_t, (const int64_t *)tg_elem_ptr(x) + xo, xs,
                         (int64_t *)tg_elem_ptr(out) + oo, os, len);
            break;
        }
    }
}

/* Lines are independent (each one runs start to end on one thread), so they are split
 * over the thread pool with results that do not depend on the thread count. */
static void cpu_scan(tg_scan_kind kind, tg_tensor *out, tg_tensor *x, int dim) {
    scan_job j = {.kind = kind, .out = out, .x = x};
    int64_t lines = tg_line_plans(x, out, dim, &j.px, &j.po), len = j.px.inner_numel;
    if (lines == 0) return;
    tg_parallel_for(lines, len >= 32768 ? 1 : 32768 / len, scan_lines, &j);
}

typedef struct {
    tg_function fn; /* first, so tg_ctx_function gives back the whole struct */
    tg_scan_kind kind;
} scan_op;

static tg_tensor *scan_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const scan_op *op = (const scan_op *)tg_ctx_function(ctx);
    int dim = *(const int *)tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    tg_tensor *out = tg_empty(x->shape, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    if (!out || x->shape.ndim == 0) return out && !tg_copy_values_(out, x) ? out : NULL;
    if (x->storage->device.kind == TG_DEVICE_CPU) cpu_scan(op->kind, out, x, dim);
    else if (TG_CUDA_CALL(op->kind == TG_SCAN_SUM ? "tg_cumsum" : "tg_cumprod", tg_cuda_scan, op->kind, out, x, dim))
        return NULL;
    if (op->kind == TG_SCAN_PROD) {
        tg_ctx_save(ctx, x);
        tg_ctx_save(ctx, out);
    }
    return out;
}

/* The running sum from the end: out_k = g_k + ... + g_{n-1}. */
static tg_tensor *reversed_cumsum(tg_tensor *g, int dim) {
    return tg_flip(tg_cumsum(tg_flip(g, &dim, 1), dim), &dim, 1);
}

/* prod of x_0 .. x_{k-1} (1 at k = 0) along dim: the product of what comes before. */
static tg_tensor *exclusive_cumprod(tg_tensor *x, int dim) {
    int64_t n = x->shape.dims[dim];
    tg_shape one = x->shape;
    one.dims[dim] = 1;
    tg_tensor *parts[2] = {tg_ones(one, (tg_opts){.dtype = x->dtype, .device = x->storage->device}),
                           tg_narrow(x, dim, 0, n - 1)};
    return tg_cumprod(tg_cat(parts, 2, dim), dim);
}

/* d out_k / d x_j = prod_{i <= k, i != j} x_i for j <= k. Without zeros this is
 * out_k / x_j, so the gradient is reversed_cumsum(g out) / x (PyTorch's fast path).
 * With a zero, x_j = 0 cannot be divided by; then, with the dim moved last,
 *   grad_j = L_j sum_{k >= j} g_k prod_{j < i <= k} x_i,  L_j = prod_{i < j} x_i,
 * where the inner products for all (j, k) are one cumprod over an [n, n] matrix (x_k
 * where k > j, else 1), kept where k >= j: O(n^2) per line, as PyTorch's path under
 * grad mode. */
static tg_tensor *cumprod_grad_with_zeros(tg_tensor *x, tg_tensor *g, int dim) {
    int last = x->shape.ndim - 1;
    int64_t n = x->shape.dims[dim];
    tg_tensor *xl = tg_movedim(x, dim, last), *gl = tg_movedim(g, dim, last);
    tg_opts idx = {.dtype = TG_INT64, .device = x->storage->device};
    tg_tensor *j = tg_view(tg_arange(0, (double)n, 1, idx), TG_SHAPE(n, 1));
    tg_tensor *k = tg_view(tg_arange(0, (double)n, 1, idx), TG_SHAPE(1, n));
    tg_tensor *after = tg_where_scalar(tg_gt(k, j), tg_unsqueeze(xl, last), 1.0); /* [..., n(j), n(k)] */
    tg_tensor *partial = tg_where_scalar(tg_ge(k, j), tg_cumprod(after, last + 1), 0.0);
    tg_tensor *inner = tg_sum_dim(tg_mul(partial, tg_unsqueeze(gl, last)), last + 1, false);
    return tg_movedim(tg_mul(exclusive_cumprod(xl, last), inner), last, dim);
}

static bool any_zero(tg_tensor *x) {
    tg_tensor *count = tg_tensor_to(tg_sum(tg_cast(tg_eq_scalar(x, 0), TG_INT64)), TG_CPU);
    return count && *(const int64_t *)tg_data_ptr(count) > 0;
}

static void scan_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const scan_op *op = (const scan_op *)tg_ctx_function(ctx);
    int dim = *(const int *)tg_ctx_attrs(ctx);
    if (tg_ndim(g) == 0) {
        grad_in[0] = g;
        return;
    }
    if (op->kind == TG_SCAN_SUM) { /* d out_k / d x_j = 1 for j <= k */
        grad_in[0] = reversed_cumsum(g, dim);
        return;
    }
    tg_tensor *x = tg_ctx_saved(ctx, 0), *out = tg_ctx_saved(ctx, 1);
    if (!x || !out) return;
    if (x->shape.dims[dim] <= 1) grad_in[0] = g;
    else if (any_zero(x)) grad_in[0] = cumprod_grad_with_zeros(x, g, dim);
    else grad_in[0] = tg_div(reversed_cumsum(tg_mul(g, out), dim), x);
}

static const scan_op cumsum_op = {{.name = "cumsum",
                                   .num_inputs = 1,
                                   .forward = scan_forward,
                                   .backward = scan_backward,
                                   .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                   .autocast = TG_AUTOCAST_FLOAT32_ON_CUDA},
                                  TG_SCAN_SUM};
static const scan_op cumprod_op = {{.name = "cumprod",
                                    .num_inputs = 1,
                                    .forward = scan_forward,
                                    .backward = scan_backward,
                                    .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                    .autocast = TG_AUTOCAST_FLOAT32_ON_CUDA},
                                   TG_SCAN_PROD};

static tg_tensor *apply_scan(const char *name, const scan_op *op, tg_tensor *x, int dim) {
    if (tg_unusable_(x)) return tg_error_unusable_input(name, x, 0), NULL;
    int d = tg_wrap_dim(dim, x->shape.ndim);
    if (d < 0) return tg_error("%s: dim %d out of range for a tensor with %d dims", name, dim, x->shape.ndim), NULL;
    if (tg_dtype_is_floating(x->dtype)) return tg_apply_args(&op->fn, &x, &d, sizeof d);
    tg_tensor *result = NULL;
    TG_SCOPE { /* integers and bool scan in int64, as PyTorch */
        tg_tensor *wide = tg_cast(x, TG_INT64);
        if (wide) result = tg_scope_return(tg_apply_args(&op->fn, &wide, &d, sizeof d));
    }
    return result;
}

tg_tensor *tg_cumsum(tg_tensor *x, int dim) { return apply_scan("tg_cumsum", &cumsum_op, x, dim); }
tg_tensor *tg_cumprod(tg_tensor *x, int dim) { return apply_scan("tg_cumprod", &cumprod_op, x, dim); }

/* ======================= prod ======================= */

typedef struct {
    int dim;
    bool keepdim;
} prod_args;

/* The last element of the running product along dim (1 for an empty dim). */
static tg_tensor *prod_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const prod_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    int64_t n = x->shape.dims[a->dim];
    tg_tensor *out;
    if (n == 0) {
        tg_shape s = x->shape;
        s.dims[a->dim] = 1;
        out = tg_ones(s, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    } else {
        out = tg_narrow(tg_cumprod(x, a->dim), a->dim, n - 1, 1);
    }
    if (out && !a->keepdim) out = tg_squeeze(out, a->dim);
    tg_ctx_save(ctx, x);
    return out ? tg_contiguous(out) : NULL;
}

/* d prod / d x_j = prod_{i < j} x_i prod_{i > j} x_i, right with zeros too (PyTorch's
 * prod_safe_zeros_backward): two exclusive running products, O(n). */
static void prod_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const prod_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_ctx_saved(ctx, 0);
    if (!x) return;
    int d = a->dim;
    if (x->shape.dims[d] == 0) return;
    tg_tensor *gk = a->keepdim ? g : tg_unsqueeze(g, d);
    tg_tensor *before = exclusive_cumprod(x, d);
    tg_tensor *after = tg_flip(exclusive_cumprod(tg_flip(x, &d, 1), d), &d, 1);
    grad_in[0] = tg_mul(gk, tg_mul(before, after));
}

static const tg_function prod_fn = {.name = "prod",
                                    .num_inputs = 1,
                                    .forward = prod_forward,
                                    .backward = prod_backward,
                                    .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                    .autocast = TG_AUTOCAST_FLOAT32_ON_CUDA};

tg_tensor *tg_prod_dim(tg_tensor *x, int dim, bool keepdim) {
    const char *name = "tg_prod_dim";
    if (tg_unusable_(x)) return tg_error_unusable_input(name, x, 0), NULL;
    int d = tg_wrap_dim(dim, x->shape.ndim);
    if (d < 0) return tg_error("%s: dim %d out of range for a tensor with %d dims", name, dim, x->shape.ndim), NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *y = x; /* integers and bool multiply in int64, as PyTorch */
        if (!tg_dtype_is_floating(x->dtype)) y = tg_cast(x, TG_INT64);
        if (y && x->shape.ndim == 0) y = tg_clone(y); /* a 0-dim tensor is its own product */
        else if (y) y = tg_apply_args(&prod_fn, &y, &(prod_args){d, keepdim}, sizeof(prod_args));
        if (y) result = tg_scope_return(y);
    }
    return result;
}

tg_tensor *tg_prod(tg_tensor *x) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_prod", x, 0), NULL;
    tg_tensor *result = NULL;
    TG_SCOPE { result = tg_scope_return(tg_prod_dim(tg_reshape(x, TG_SHAPE(tg_numel(x))), 0, false)); }
    return result;
}
