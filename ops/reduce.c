/* Reductions: sum and mean (definitions and gradients; kernels: ops/cpu/sum.c). max/min/argmax:
 * ops/reduce_extrema.c; var/std/logsumexp/norm: ops/reduce_stats.c; softmax: ops/softmax.c.
 * CUDA kernels: ops/cuda/reduce.cu. */
#include "ops/reduce.h"

#include <stdlib.h>

#include "autograd/function.h"
#include "core/lowp.h"
#include "core/scope.h"
#include "onnx/graph.h"
#include "ops/cpu/sum.h"
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
    if (tg_on_cuda(x)) {
        if (TG_CUDA_CALL("tg_sum", tg_cuda_sum, out, x, a->reduce)) return NULL;
        return out;
    }
    if (x != in[0]) tg_reduce_plan_init(&p, x, a->reduce); /* the copy's strides */
    if (dtype == TG_BFLOAT16) tg_cpu_sum_bf16(&p, tg_data_ptr(x), tg_data_ptr(out));
    else if (dtype == TG_FLOAT16) tg_cpu_sum_f16(&p, tg_data_ptr(x), tg_data_ptr(out));
    else if (dtype == TG_FLOAT32 && full_run)
        *(float *)tg_data_ptr(out) = (float)tg_cpu_sum_all_f32(tg_data_ptr(x), p.inner_numel);
    else if (dtype == TG_FLOAT32) tg_cpu_sum_f32(&p, tg_data_ptr(x), tg_data_ptr(out));
    else if (dtype == TG_FLOAT64) tg_cpu_sum_f64(&p, tg_data_ptr(x), tg_data_ptr(out));
    else tg_cpu_sum_i64(&p, tg_data_ptr(x), tg_data_ptr(out));
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

/* A floating sum as ReduceMean * count (ReduceMean's axes an attribute through opset 17:
 * OpenCV 4.6 imports it, but ReduceSum only from opset 12 and older), over H and W of an
 * NCHW tensor kept 4-D (AdaptiveAvgPool2d(1)'s mean) as GlobalAveragePool * count (as
 * torch.onnx; OpenCV 4.6's ReduceMean there fails at batch sizes other than 1), an
 * integer one as ReduceSum (axes an input), after a Cast where the sum widens the dtype. */
static tg_status sum_onnx(tg_onnx_op *op) {
    const reduce_args *a = tg_onnx_attrs(op);
    tg_tensor *x = tg_onnx_input(op, 0), *y = tg_onnx_output(op, 0);
    int64_t axes[TG_MAX_DIMS], count = 1;
    int n = 0;
    for (int d = 0; d < x->shape.ndim; d++)
        if (a->reduce[d]) axes[n++] = d, count *= x->shape.dims[d];
    const char *in[] = {tg_onnx_input_name(op, 0), NULL}, *out = tg_onnx_output_name(op, 0);
    if (x->dtype != y->dtype) {
        const char *cast = tg_onnx_value(op);
        tg_onnx_attr_int(tg_onnx_add_node(op, "Cast", 1, in, 1, &cast), "to", tg_onnx_dtype(y->dtype));
        in[0] = cast;
    }
    bool mean = tg_dtype_is_floating(y->dtype);
    bool global = mean && a->keepdim && x->shape.ndim == 4 && n == 2 && axes[0] == 2;
    const char *sum = mean ? tg_onnx_value(op) : out;
    if (!mean) in[1] = tg_onnx_const_ints(op, axes, n);
    tg_onnx_node *node = tg_onnx_add_node(op,
                                          global ? "GlobalAveragePool"
                                          : mean ? "ReduceMean"
                                                 : "ReduceSum",
                                          mean ? 1 : 2, in, 1, &sum);
    if (mean && !global) tg_onnx_attr_ints(node, "axes", axes, n);
    if (!global) tg_onnx_attr_int(node, "keepdims", a->keepdim);
    if (!node || !mean) return node ? TG_OK : TG_ERROR;
    const char *mul[] = {sum, tg_onnx_const_scalar(op, y->dtype, (double)count)};
    return tg_onnx_add_node(op, "Mul", 2, mul, 1, &out) ? TG_OK : TG_ERROR;
}

static const tg_function sum_fn = {.name = "sum",
                                   .num_inputs = 1,
                                   .forward = sum_forward,
                                   .backward = sum_backward,
                                   .low_precision = TG_LOW_PRECISION_NATIVE,
                                   .autocast = TG_AUTOCAST_FLOAT32_ON_CUDA,
                                   .onnx = sum_onnx};

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
                        tg_shape_str(t->shape, s2, sizeof s2)),
               NULL;
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
