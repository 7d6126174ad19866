/* Statistical reductions: var, std, logsumexp, vector norm (torch.var, torch.std,
 * torch.logsumexp, torch.linalg.vector_norm). CPU kernels accumulate in double;
 * backward formulas (after PyTorch's FunctionsManual.cpp) are written with ops, so
 * they are differentiable again. The rows of ops/reduce_formulas.h define them (the
 * formulas both devices run, the gradients, the ops and their public functions);
 * this file expands the rows. CPU: ops/cpu/stats.c; CUDA: ops/cuda/reduce.cu. */
#include <math.h>

#include "autograd/function.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/cpu/stats.h"
#include "ops/cuda/reduce.h"
#include "ops/dispatch.h"
#include "ops/elementwise_impl.h"
#include "ops/reduce.h"
#include "ops/reduce_dims.h"
#include "ops/reduce_formulas.h"
#include "ops/reduce_plan.h"
#include "ops/shape.h"

typedef struct {
    bool reduce[TG_MAX_DIMS];
    bool keepdim;
    double param; /* the row's q: var/std: the correction (1 unbiased, 0 not); norm: p */
} stat_args;

typedef struct {
    tg_function fn; /* first, so tg_ctx_function gives back the whole struct */
    tg_reduce_kind kind;
    const char *op;
} stat_op;

static tg_tensor *stat_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const stat_op *op = (const stat_op *)tg_ctx_function(ctx);
    const stat_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    tg_tensor *out = tg_empty(tg_reduced_shape(x->shape, a->reduce, a->keepdim),
                              (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    if (!out) return NULL;
    if (tg_on_cuda(x)) {
        if (TG_CUDA_CALL(op->op, tg_cuda_stat, op->op, out, x, a->reduce, op->kind, a->param)) return NULL;
    } else {
        tg_reduce_plan p;
        tg_reduce_plan_init(&p, x, a->reduce);
        if (x->dtype == TG_FLOAT32) tg_cpu_stats_f32(&p, tg_elem_ptr(x), tg_data_ptr(out), op->kind, a->param);
        else tg_cpu_stats_f64(&p, tg_elem_ptr(x), tg_data_ptr(out), op->kind, a->param);
    }
    tg_ctx_save(ctx, x);
    tg_ctx_save(ctx, out);
    return out;
}

/* t with the reduced dims put back as size 1 (broadcasts against the input). */
static tg_tensor *keep(tg_tensor *t, tg_shape input_shape, const stat_args *a) {
    return a->keepdim ? t : tg_reshape(t, tg_reduced_shape(input_shape, a->reduce, true));
}

/* where(cond_zero, 0, v): PyTorch's masked_fill_(norm == 0, 0) in the formulas below. */
static tg_tensor *zero_where_zero(tg_tensor *denominator, tg_tensor *v) {
    tg_tensor *zero = tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = tg_dtype_of(v), .device = tg_device_of(v)});
    return tg_where(tg_eq(denominator, zero), zero, v);
}

/* var's gradient 2 (x - mean) g / (N - correction). */
static tg_tensor *var_backward(tg_tensor *g, tg_tensor *x, const int *dims, int nd, double n, double correction) {
    tg_tensor *centered = nd ? tg_sub(x, tg_mean_dims(x, dims, nd, true)) : tg_zeros_like(x);
    return tg_mul(tg_mul_scalar(centered, 2 / (n - correction)), g);
}

/* The p-norm's gradient, y the norm. */
static tg_tensor *norm_backward(tg_tensor *g, tg_tensor *x, tg_tensor *y, double p, const int *dims, int nd) {
    if (p == 1) return tg_mul(tg_sign(x), g);
    if (p == 2) return tg_mul(x, zero_where_zero(y, tg_div(g, y)));
    if (isinf(p)) { /* shared evenly by the elements of largest magnitude */
        tg_tensor *mask = tg_cast(tg_eq(tg_abs(x), tg_detach(y)), tg_dtype_of(x));
        tg_tensor *count = nd ? tg_sum_dims(mask, dims, nd, true) : mask;
        return tg_mul(tg_mul(tg_sign(x), mask), tg_div(g, count));
    }
    /* sign(x) |x|^(p-1) g / norm^(p-1), as PyTorch's norm_backward: written as
     * x |x|^(p-2) only for p >= 2, where it has no 0 * inf; zero at x == 0 for p < 1 */
    tg_tensor *scale = zero_where_zero(y, tg_div(g, tg_pow_scalar(y, p - 1)));
    tg_tensor *scaled =
        p >= 2 ? tg_mul(x, tg_pow_scalar(tg_abs(x), p - 2)) : tg_mul(tg_sign(x), tg_pow_scalar(tg_abs(x), p - 1));
    if (p < 1) scaled = zero_where_zero(x, scaled);
    return tg_mul(scaled, scale);
}

/* The gradient column of ops/reduce_formulas.h. */
#define STAT_BACKWARD_CASE(KIND, name, api, autocast, first, identity, map, combine, finalise, gradient) \
    case TG_REDUCE_##KIND: grad_in[0] = (gradient); break;

static void stat_backward(tg_ctx *ctx, tg_tensor *g_out, tg_tensor **grad_in) {
    const stat_op *op = (const stat_op *)tg_ctx_function(ctx);
    const stat_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_ctx_saved(ctx, 0), *y_out = tg_ctx_saved(ctx, 1);
    if (!x || !y_out) return;
    tg_shape shape = tg_ctx_input_shape(ctx, 0);
    tg_tensor *g = keep(g_out, shape, a), *y = keep(y_out, shape, a);
    int dims[TG_MAX_DIMS], nd = 0;
    for (int d = 0; d < shape.ndim; d++)
        if (a->reduce[d]) dims[nd++] = d;
    double n = (double)tg_reduced_count(shape, a->reduce), q = a->param;
    switch (op->kind) {
        TG_REDUCE_FORMULAS(STAT_BACKWARD_CASE)
    default: break;
    }
}

/* The ops of the rows whose api is not NONE, and the CORRECTION and DIM rows' public
 * functions (after apply_stat). */
#define STAT_OP(KIND, op_name, policy)                                                  \
    static const stat_op op_name##_op = {{.name = #op_name,                             \
                                          .num_inputs = 1,                              \
                                          .forward = stat_forward,                      \
                                          .backward = stat_backward,                    \
                                          .low_precision = TG_LOW_PRECISION_IN_FLOAT32, \
                                          .autocast = TG_AUTOCAST_##policy},            \
                                         TG_REDUCE_##KIND,                              \
                                         "tg_" #op_name};
#define STAT_API_NONE(KIND, op_name, policy)
#define STAT_API_OWN STAT_OP
#define STAT_API_CORRECTION(KIND, op_name, policy)                                                      \
    STAT_OP(KIND, op_name, policy)                                                                      \
    tg_tensor *tg_##op_name(tg_tensor *t, const int *dims, int num_dims, bool unbiased, bool keepdim) { \
        return apply_stat(&op_name##_op, t, dims, num_dims, keepdim, unbiased ? 1 : 0);                 \
    }
#define STAT_API_DIM(KIND, op_name, policy)                        \
    STAT_OP(KIND, op_name, policy)                                 \
    tg_tensor *tg_##op_name(tg_tensor *t, int dim, bool keepdim) { \
        return apply_stat(&op_name##_op, t, &dim, 1, keepdim, 0);  \
    }
#define STAT_API(KIND, name, api, autocast, first, identity, map, combine, finalise, gradient) \
    STAT_API_##api(KIND, name, autocast)

static tg_tensor *apply_stat(const stat_op *op, tg_tensor *t, const int *dims, int num_dims, bool keepdim,
                             double param) {
    if (tg_unusable_(t)) return tg_error_unusable_input(op->op, t, 0), NULL;
    if (!tg_dtype_is_floating(t->dtype))
        return tg_error("%s: expected a float32, float64, float16 or bfloat16 tensor, got %s", op->op,
                        tg_dtype_name(t->dtype)),
               NULL;
    if (num_dims < 0 || num_dims > TG_MAX_DIMS || (num_dims > 0 && !dims))
        return tg_error("%s: invalid dims list (%d entries)", op->op, num_dims), NULL;
    stat_args a = {.keepdim = keepdim, .param = param};
    if (tg_reduce_dims_mask(op->op, t, dims, num_dims, a.reduce)) return NULL;
    return tg_apply_args(&op->fn, &t, &a, sizeof a);
}

TG_REDUCE_FORMULAS(STAT_API)

tg_tensor *tg_norm(tg_tensor *t, double p, const int *dims, int num_dims, bool keepdim) {
    if (!(p > 0)) return tg_error("tg_norm: p must be positive (or INFINITY), got %g", p), NULL;
    return apply_stat(&norm_op, t, dims, num_dims, keepdim, p);
}
