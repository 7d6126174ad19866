/* Reductions that pick an element: max/min (all or along a dim, with indices) and
 * argmax/argmin (torch.max, torch.min, torch.argmax, torch.argmin). Kernels:
 * ops/cpu/extreme.c; CUDA: tg_cuda_extreme in ops/cuda/reduce.cu. */
#include <math.h>

#include "autograd/function.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/cpu/extreme.h"
#include "ops/cuda/reduce.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/reduce_dims.h"
#include "ops/reduce_plan.h"
#include "ops/shape.h"

/* values (x's dtype) and/or indices (int64): contiguous, the reduced shape. */
static tg_status extreme_compute(const char *op, tg_tensor *values, tg_tensor *indices, tg_tensor *x, const bool *mask,
                                 bool is_max) {
    if (tg_on_cuda(x)) return TG_CUDA_CALL(op, tg_cuda_extreme, values, indices, x, mask, is_max);
    tg_reduce_plan p;
    tg_reduce_plan_init(&p, x, mask);
    void *v = values ? tg_data_ptr(values) : NULL;
    int64_t *i = indices ? tg_data_ptr(indices) : NULL;
    switch (x->dtype) {
    case TG_FLOAT32: tg_cpu_extreme_f32(&p, tg_elem_ptr(x), v, i, is_max); break;
    case TG_FLOAT64: tg_cpu_extreme_f64(&p, tg_elem_ptr(x), v, i, is_max); break;
    case TG_INT64: tg_cpu_extreme_i64(&p, tg_elem_ptr(x), v, i, is_max); break;
    case TG_INT32: tg_cpu_extreme_i32(&p, tg_elem_ptr(x), v, i, is_max); break;
    case TG_UINT8:
    case TG_BOOL: tg_cpu_extreme_u8(&p, tg_elem_ptr(x), v, i, is_max); break;
    default: return tg_error("%s: not implemented for dtype %s", op, tg_dtype_name(x->dtype));
    }
    return TG_OK;
}

static tg_status check_extreme_input(const char *op, tg_tensor *t, const bool *mask) {
    if (!tg_dtype_is_supported(t->dtype))
        return tg_error("%s: not implemented for dtype %s", op, tg_dtype_name(t->dtype));
    if (tg_reduced_count(t->shape, mask) == 0) {
        char s[128];
        return tg_error("%s: cannot reduce over an empty dim of a tensor of shape %s (no identity)", op,
                        tg_shape_str(t->shape, s, sizeof s));
    }
    return TG_OK;
}

/* ---- max / min over everything ---- */

typedef struct {
    bool is_max;
    bool keepdim;
    int dim; /* wrapped (0 for a 0-dim tensor); unused by the all-reduction */
} extreme_args;

static tg_tensor *extreme_all_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const extreme_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    bool mask[TG_MAX_DIMS];
    for (int d = 0; d < TG_MAX_DIMS; d++) mask[d] = d < x->shape.ndim;
    tg_tensor *out = tg_empty(TG_SCALAR_SHAPE, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    if (!out || extreme_compute(a->is_max ? "tg_max" : "tg_min", out, NULL, x, mask, a->is_max)) return NULL;
    tg_ctx_save(ctx, x);
    tg_ctx_save(ctx, out);
    return out;
}

/* PyTorch's evenly_distribute_backward: every element equal to the result shares g. */
static void extreme_all_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    tg_tensor *x = tg_ctx_saved(ctx, 0), *y = tg_ctx_saved(ctx, 1);
    if (!x || !y) return;
    tg_tensor *mask = tg_cast(tg_eq(x, tg_detach(y)), tg_dtype_of(x));
    grad_in[0] = tg_mul(tg_div(g, tg_sum(mask)), mask);
}

static const tg_function max_all_fn = {.name = "max",
                                       .num_inputs = 1,
                                       .forward = extreme_all_forward,
                                       .backward = extreme_all_backward,
                                       .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                       .autocast = TG_AUTOCAST_NONE};
static const tg_function min_all_fn = {.name = "min",
                                       .num_inputs = 1,
                                       .forward = extreme_all_forward,
                                       .backward = extreme_all_backward,
                                       .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                       .autocast = TG_AUTOCAST_NONE};

static tg_tensor *extreme_all(const char *op, const tg_function *fn, tg_tensor *t, bool is_max) {
    if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 0), NULL;
    bool mask[TG_MAX_DIMS];
    for (int d = 0; d < TG_MAX_DIMS; d++) mask[d] = d < t->shape.ndim;
    if (check_extreme_input(op, t, mask)) return NULL;
    extreme_args a = {is_max, false, 0};
    return tg_apply_args(fn, &t, &a, sizeof a);
}

tg_tensor *tg_max(tg_tensor *t) { return extreme_all("tg_max", &max_all_fn, t, true); }
tg_tensor *tg_min(tg_tensor *t) { return extreme_all("tg_min", &min_all_fn, t, false); }

/* ---- amax / amin over dims ---- */

typedef struct {
    bool is_max, keepdim;
    bool mask[TG_MAX_DIMS];
} amax_args;

static tg_tensor *amax_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const amax_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    tg_tensor *out = tg_empty(tg_reduced_shape(x->shape, a->mask, a->keepdim),
                              (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    if (!out || extreme_compute(a->is_max ? "tg_amax" : "tg_amin", out, NULL, x, a->mask, a->is_max)) return NULL;
    tg_ctx_save(ctx, x);
    tg_ctx_save(ctx, out);
    return out;
}

/* As tg_max's: the elements equal to their group's extreme share its gradient evenly. */
static void amax_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const amax_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_ctx_saved(ctx, 0), *y = tg_ctx_saved(ctx, 1);
    if (!x || !y) return;
    tg_shape kept = tg_reduced_shape(tg_shape_of(x), a->mask, true);
    tg_tensor *hit = tg_cast(tg_eq(x, tg_reshape(tg_detach(y), kept)), tg_dtype_of(x));
    int dims[TG_MAX_DIMS], n = 0;
    for (int d = 0; d < tg_ndim(x); d++)
        if (a->mask[d]) dims[n++] = d;
    tg_tensor *count = n ? tg_sum_dims(hit, dims, n, true) : tg_ones_like(hit);
    grad_in[0] = tg_mul(tg_div(tg_reshape(g, kept), count), hit);
}

static const tg_function amax_fn = {.name = "amax",
                                    .num_inputs = 1,
                                    .forward = amax_forward,
                                    .backward = amax_backward,
                                    .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                    .autocast = TG_AUTOCAST_NONE};
static const tg_function amin_fn = {.name = "amin",
                                    .num_inputs = 1,
                                    .forward = amax_forward,
                                    .backward = amax_backward,
                                    .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                    .autocast = TG_AUTOCAST_NONE};

static tg_tensor *amax(const char *op, const tg_function *fn, tg_tensor *t, const int *dims, int num_dims, bool keepdim,
                       bool is_max) {
    if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 0), NULL;
    amax_args a = {is_max, keepdim, {0}};
    if (num_dims < 0 || (num_dims > 0 && !dims)) return tg_error("%s: %d dims given", op, num_dims), NULL;
    if (tg_reduce_dims_mask(op, t, dims, num_dims, a.mask) || check_extreme_input(op, t, a.mask)) return NULL;
    return tg_apply_args(fn, &t, &a, sizeof a);
}

tg_tensor *tg_amax(tg_tensor *t, const int *dims, int num_dims, bool keepdim) {
    return amax("tg_amax", &amax_fn, t, dims, num_dims, keepdim, true);
}
tg_tensor *tg_amin(tg_tensor *t, const int *dims, int num_dims, bool keepdim) {
    return amax("tg_amin", &amin_fn, t, dims, num_dims, keepdim, false);
}

/* ---- max / min along a dim: values and indices ---- */

static tg_tensor *extreme_dim_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const extreme_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    bool mask[TG_MAX_DIMS] = {false};
    if (x->shape.ndim > 0) mask[a->dim] = true;
    tg_shape shape = tg_reduced_shape(x->shape, mask, a->keepdim);
    tg_tensor *values = tg_empty(shape, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    tg_tensor *indices = tg_empty(shape, (tg_opts){.dtype = TG_INT64, .device = x->storage->device});
    if (!values || !indices ||
        extreme_compute(a->is_max ? "tg_max_dim" : "tg_min_dim", values, indices, x, mask, a->is_max))
        return NULL;
    tg_ctx_set_output(ctx, 1, indices);
    tg_ctx_mark_non_differentiable(ctx, 1);
    tg_ctx_save(ctx, indices); /* a saved non-differentiable output is kept without graph link */
    return values;
}

/* The gradient goes to the selected index only (PyTorch's value_selecting_reduction_backward). */
static void extreme_dim_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const extreme_args *a = tg_ctx_attrs(ctx);
    tg_tensor *idx = tg_ctx_saved(ctx, 0);
    if (!idx) return;
    tg_shape in_shape = tg_ctx_input_shape(ctx, 0);
    if (in_shape.ndim == 0) {
        grad_in[0] = g;
        return;
    }
    if (!a->keepdim) {
        g = tg_unsqueeze(g, a->dim);
        idx = tg_unsqueeze(idx, a->dim);
    }
    grad_in[0] = tg_scatter_add(tg_zeros(in_shape, (tg_opts){.dtype = tg_dtype_of(g), .device = tg_device_of(g)}),
                                a->dim, idx, g);
}

static const tg_function max_dim_fn = {.name = "max_dim",
                                       .num_inputs = 1,
                                       .forward = extreme_dim_forward,
                                       .backward = extreme_dim_backward,
                                       .num_outputs = 2,
                                       .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                       .autocast = TG_AUTOCAST_NONE};
static const tg_function min_dim_fn = {.name = "min_dim",
                                       .num_inputs = 1,
                                       .forward = extreme_dim_forward,
                                       .backward = extreme_dim_backward,
                                       .num_outputs = 2,
                                       .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                       .autocast = TG_AUTOCAST_NONE};

static tg_status prepare_dim(const char *op, tg_tensor *t, int dim, bool is_max, bool keepdim, extreme_args *a) {
    if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 0);
    int d = tg_wrap_dim(dim, t->shape.ndim);
    if (d < 0) {
        char s[128];
        return tg_error("%s: dim %d out of range for a tensor of shape %s", op, dim,
                        tg_shape_str(t->shape, s, sizeof s));
    }
    bool mask[TG_MAX_DIMS] = {false};
    if (t->shape.ndim > 0) mask[d] = true;
    if (check_extreme_input(op, t, mask)) return TG_ERROR;
    *a = (extreme_args){is_max, keepdim, t->shape.ndim > 0 ? d : 0};
    return TG_OK;
}

static tg_tensor *extreme_dim(const char *op, const tg_function *fn, tg_tensor *t, int dim, bool keepdim,
                              tg_tensor **indices, bool is_max) {
    if (indices) *indices = NULL;
    extreme_args a;
    if (prepare_dim(op, t, dim, is_max, keepdim, &a)) return NULL;
    tg_tensor *values = NULL;
    TG_SCOPE { /* the indices die with this scope unless asked for */
        tg_tensor *outputs[2];
        if (tg_apply_multi_args(fn, &t, &a, sizeof a, outputs) == TG_OK) {
            values = tg_scope_return(outputs[0]);
            if (indices) *indices = tg_scope_return(outputs[1]);
        }
    }
    return values;
}

tg_tensor *tg_max_dim(tg_tensor *t, int dim, bool keepdim, tg_tensor **indices) {
    return extreme_dim("tg_max_dim", &max_dim_fn, t, dim, keepdim, indices, true);
}
tg_tensor *tg_min_dim(tg_tensor *t, int dim, bool keepdim, tg_tensor **indices) {
    return extreme_dim("tg_min_dim", &min_dim_fn, t, dim, keepdim, indices, false);
}

/* ---- argmax / argmin (not differentiable) ---- */

static tg_tensor *arg_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const extreme_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    bool mask[TG_MAX_DIMS] = {false};
    if (x->shape.ndim > 0) mask[a->dim] = true;
    tg_tensor *indices = tg_empty(tg_reduced_shape(x->shape, mask, a->keepdim),
                                  (tg_opts){.dtype = TG_INT64, .device = x->storage->device});
    if (!indices || extreme_compute(a->is_max ? "tg_argmax" : "tg_argmin", NULL, indices, x, mask, a->is_max))
        return NULL;
    return indices;
}

static const tg_function argmax_fn = {.name = "argmax",
                                      .num_inputs = 1,
                                      .forward = arg_forward,
                                      .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                      .autocast = TG_AUTOCAST_NONE};
static const tg_function argmin_fn = {.name = "argmin",
                                      .num_inputs = 1,
                                      .forward = arg_forward,
                                      .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                      .autocast = TG_AUTOCAST_NONE};

tg_tensor *tg_argmax(tg_tensor *t, int dim, bool keepdim) {
    extreme_args a;
    if (prepare_dim("tg_argmax", t, dim, true, keepdim, &a)) return NULL;
    return tg_apply_args(&argmax_fn, &t, &a, sizeof a);
}

tg_tensor *tg_argmin(tg_tensor *t, int dim, bool keepdim) {
    extreme_args a;
    if (prepare_dim("tg_argmin", t, dim, false, keepdim, &a)) return NULL;
    return tg_apply_args(&argmin_fn, &t, &a, sizeof a);
}
