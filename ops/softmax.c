/* softmax and log_softmax along one dim (torch.softmax / torch.log_softmax): the
 * definitions, backward formulas written with ops (so they are differentiable again).
 * Kernels: ops/cpu/softmax.c, ops/cuda/softmax.cu. */
#include <math.h>

#include "autograd/function.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "onnx/graph.h"
#include "ops/cpu/softmax.h"
#include "ops/cuda/softmax.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/reduce_plan.h"

typedef struct {
    int dim;  /* wrapped; 0 for a 0-dim tensor */
    bool log; /* log_softmax */
} softmax_args;

static tg_tensor *softmax_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const softmax_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    tg_tensor *out = tg_empty(x->shape, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
    if (!out) return NULL;
    if (tg_on_cuda(x)) {
        if (x->shape.ndim > 0 &&
            TG_CUDA_CALL(a->log ? "tg_log_softmax" : "tg_softmax", tg_cuda_softmax, out, x, a->dim, a->log))
            return NULL;
        if (x->shape.ndim == 0 && tg_fill_values_(out, a->log ? 0.0 : 1.0)) return NULL;
    } else {
        /* One "row" per position of the other dims; the reduce plan walks the strides
         * (a contiguous last dim is the unit-stride fast case of the same loop). */
        bool mask[TG_MAX_DIMS] = {false};
        if (x->shape.ndim > 0) mask[a->dim] = true;
        tg_reduce_plan px, po;
        tg_reduce_plan_init(&px, x, mask);
        tg_reduce_plan_init(&po, out, mask);
        if (x->dtype == TG_FLOAT32) tg_cpu_softmax_f32(&px, &po, tg_elem_ptr(x), tg_elem_ptr(out), a->log);
        else tg_cpu_softmax_f64(&px, &po, tg_elem_ptr(x), tg_elem_ptr(out), a->log);
    }
    tg_ctx_save(ctx, out);
    return out;
}

/* With y the output (PyTorch's _softmax_backward_data / _log_softmax_backward_data):
 *   softmax:     grad_x = y * (g - sum(g * y, dim))
 *   log_softmax: grad_x = g - exp(y) * sum(g, dim) */
static void softmax_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const softmax_args *a = tg_ctx_attrs(ctx);
    tg_tensor *y = tg_ctx_saved(ctx, 0);
    if (!y) return;
    int dim = tg_ndim(y) > 0 ? a->dim : 0;
    if (tg_ndim(y) == 0) { /* a single element: the output is constant */
        grad_in[0] = tg_zeros_like(g);
        return;
    }
    if (a->log) grad_in[0] = tg_sub(g, tg_mul(tg_exp(y), tg_sum_dim(g, dim, true)));
    else grad_in[0] = tg_mul(y, tg_sub(g, tg_sum_dim(tg_mul(g, y), dim, true)));
}

static tg_status softmax_onnx(tg_onnx_op *op) {
    const softmax_args *a = tg_onnx_attrs(op);
    tg_onnx_node *n = tg_onnx_add_node_same(op, a->log ? "LogSoftmax" : "Softmax");
    tg_onnx_attr_int(n, "axis", a->dim);
    return n ? TG_OK : TG_ERROR;
}

static const tg_function softmax_fn = {.name = "softmax",
                                       .num_inputs = 1,
                                       .forward = softmax_forward,
                                       .backward = softmax_backward,
                                       .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                       .autocast = TG_AUTOCAST_FLOAT32_ON_CUDA,
                                       .onnx = softmax_onnx};
static const tg_function log_softmax_fn = {.name = "log_softmax",
                                           .num_inputs = 1,
                                           .forward = softmax_forward,
                                           .backward = softmax_backward,
                                           .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                           .autocast = TG_AUTOCAST_FLOAT32_ON_CUDA,
                                           .onnx = softmax_onnx};

static tg_tensor *apply_softmax(const char *op, const tg_function *fn, tg_tensor *t, int dim, bool log) {
    if (tg_unusable_(t)) return tg_error_unusable_input(op, t, 0), NULL;
    if (!tg_dtype_is_floating(t->dtype))
        return tg_error("%s: expected a float32, float64, float16 or bfloat16 tensor, got %s", op,
                        tg_dtype_name(t->dtype)),
               NULL;
    int d = tg_wrap_dim(dim, t->shape.ndim);
    if (d < 0) {
        char s[128];
        return tg_error("%s: dim %d out of range for a tensor of shape %s", op, dim,
                        tg_shape_str(t->shape, s, sizeof s)),
               NULL;
    }
    softmax_args a = {d, log};
    return tg_apply_args(fn, &t, &a, sizeof a);
}

tg_tensor *tg_softmax(tg_tensor *t, int dim) { return apply_softmax("tg_softmax", &softmax_fn, t, dim, false); }
tg_tensor *tg_log_softmax(tg_tensor *t, int dim) {
    return apply_softmax("tg_log_softmax", &log_softmax_fn, t, dim, true);
}
