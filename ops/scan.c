/* cumsum (see ops/scan.h): the CPU loop runs ops/scan_line.h's formula, the CUDA
 * kernel the same; the gradient is composed of flip and cumsum itself. */
#include "ops/scan.h"

#include "autograd/function.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/composite.h"
#include "ops/cuda/scan.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce_plan.h"
#include "ops/scan_line.h"

static void cpu_cumsum(tg_tensor *out, tg_tensor *x, int dim) {
    bool mask[TG_MAX_DIMS] = {false};
    mask[dim] = true;
    tg_reduce_plan px, po;
    tg_reduce_plan_init(&px, x, mask);
    tg_reduce_plan_init(&po, out, mask);
    int64_t len = px.inner_numel, xs = px.inner_ndim ? px.inner_strides[0] : 1;
    int64_t os = po.inner_ndim ? po.inner_strides[0] : 1;
    for (int64_t o = 0; o < px.outer_numel && len > 0; o++) {
        int64_t xo = tg_reduce_outer_offset(&px, o), oo = tg_reduce_outer_offset(&po, o);
        switch (x->dtype) {
        case TG_FLOAT32: TG_CUMSUM_LINE(float, double, (const float *)tg_elem_ptr(x) + xo, xs,
                                        (float *)tg_elem_ptr(out) + oo, os, len); break;
        case TG_FLOAT64: TG_CUMSUM_LINE(double, double, (const double *)tg_elem_ptr(x) + xo, xs,
                                        (double *)tg_elem_ptr(out) + oo, os, len); break;
        default: TG_CUMSUM_LINE(int64_t, int64_t, (const int64_t *)tg_elem_ptr(x) + xo, xs,
                                (int64_t *)tg_elem_ptr(out) + oo, os, len); break;
        }
    }
}

static tg_tensor *cumsum_forward(tg_ctx *ctx, tg_tensor *const *in) {
    int dim = *(const int *)tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    tg_tensor *out = tg_empty(x->shape, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    if (!out || x->shape.ndim == 0) return out && !tg_copy_values_(out, x) ? out : NULL;
    if (x->storage->device.kind == TG_DEVICE_CPU) {
        cpu_cumsum(out, x, dim);
        return out;
    }
    return TG_CUDA_CALL("tg_cumsum", tg_cuda_cumsum, out, x, dim) ? NULL : out;
}

/* d out_k / d x_j = 1 for j <= k: the gradient is the reversed running sum. */
static void cumsum_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    int dim = *(const int *)tg_ctx_attrs(ctx);
    if (tg_ndim(g) == 0) {
        grad_in[0] = g;
        return;
    }
    grad_in[0] = tg_flip(tg_cumsum(tg_flip(g, &dim, 1), dim), &dim, 1);
}

static const tg_function cumsum_fn = {"cumsum", 1, cumsum_forward, cumsum_backward, 0, TG_LOW_PRECISION_IN_FLOAT32, TG_AUTOCAST_FLOAT32_ON_CUDA};

tg_tensor *tg_cumsum(tg_tensor *x, int dim) {
    if (!x) return tg_error_null_input("tg_cumsum", 0), NULL;
    int d = tg_wrap_dim(dim, x->shape.ndim);
    if (d < 0) return tg_error("tg_cumsum: dim %d out of range for a tensor with %d dims", dim, x->shape.ndim), NULL;
    if (tg_dtype_is_floating(x->dtype)) return tg_apply_args(&cumsum_fn, &x, &d, sizeof d);
    tg_tensor *result = NULL;
    TG_SCOPE { /* integers and bool sum in int64, as PyTorch */
        tg_tensor *wide = tg_cast(x, TG_INT64);
        if (wide) result = tg_scope_return(tg_apply_args(&cumsum_fn, &wide, &d, sizeof d));
    }
    return result;
}
