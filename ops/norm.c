/* Batch norm and layer norm (CPU kernels: ops/cpu/norm.c; CUDA: ops/cuda/norm.cu).
 *
 * Forward: one CPU kernel per op (statistics in double, two passes). Backward: the
 * standard closed form (Ioffe & Szegedy 2015, sec. 3; ATen's batch_norm_backward /
 * layer_norm_backward), written with ops so that it is device-generic and
 * differentiable again. With xhat = (x - mean) * invstd over the M elements a
 * statistic covers and dxhat = g * w:
 *   dx = invstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
 *   dw = sum(g * xhat),  db = sum(g)   (over the dims the weight is broadcast along)
 * The statistics are recomputed with ops in backward (not the forward's constants),
 * which keeps higher derivatives exact. Batch norm in eval mode is plain ops.
 *
 * Batch norm and layer norm training on the CPU take a fused path when the backward is
 * not itself recorded (no create_graph): batch_norm_backward computes dx, dw, db in two
 * passes per channel, layer_norm_backward in one pass per row (and column sums over fixed
 * blocks of rows), from the mean/invstd the forward saved, instead of ~15 elementwise ops
 * and their temporaries (the GPT lesson's LayerNorms: 22 -> 2 ms a step). With
 * create_graph the composed formula above runs, as before. */
#include "ops/norm.h"
#include "onnx/graph.h"
#include "ops/cpu/norm.h"
#include "ops/cpu/norm_bf16.h"
#include "ops/norm_running.h"

#include <math.h>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/parallel.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "ops/cuda/norm.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"

typedef tg_norm_args norm_args; /* ops/cpu/norm.h: what the kernels are given */

/* Inputs: x, weight, bias (weight/bias may be constants of ones/zeros when absent).
 * Outputs: y, batch mean, biased batch var (the last two non-differentiable). */
static tg_tensor *mixed_forward_bf16(tg_ctx *ctx, tg_tensor *const *in);

static tg_tensor *norm_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const norm_args *a = tg_ctx_attrs(ctx);
    if (in[0]->dtype == TG_BFLOAT16 && in[0]->storage->device.kind == TG_DEVICE_CPU) return mixed_forward_bf16(ctx, in);
    /* mixed batch norm (below): a float32 copy of x for this forward only */
    bool mixed = tg_dtype_is_low_precision(in[0]->dtype);
    tg_tensor *x = mixed ? tg_cast(in[0], TG_FLOAT32) : tg_contiguous(in[0]);
    tg_tensor *w = tg_contiguous(in[1]), *b = tg_contiguous(in[2]);
    bool has_residual = tg_ctx_function(ctx)->num_inputs == 4; /* bn_add_relu_fn */
    tg_tensor *residual = has_residual ? tg_contiguous(in[3]) : NULL;
    if (!x || !w || !b || (has_residual && !residual)) return NULL;
    tg_opts o = {.dtype = x->dtype, .device = x->storage->device};
    tg_tensor *y = tg_empty(x->shape, o), *mean = tg_empty(TG_SHAPE(a->groups), o),
              *var = tg_empty(TG_SHAPE(a->groups), o);
    if (!y || !mean || !var) return NULL;
    tg_tensor *stats = NULL;
    if (tg_on_cuda(x)) {
        if (TG_CUDA_CALL(a->layer ? "tg_layer_norm" : "tg_batch_norm", tg_cuda_norm_forward, y, mean, var, x, w, b, a))
            return NULL;
    } else {
        /* The CPU also keeps (mean, invstd) per channel or row in double for the fused backwards. */
        if (!(stats = tg_empty(TG_SHAPE(a->groups, 2), (tg_opts){.dtype = TG_FLOAT64}))) return NULL;
        double *st = stats ? tg_data_ptr(stats) : NULL;
        const void *r = residual ? tg_data_ptr(residual) : NULL;
        if (x->dtype == TG_FLOAT32)
            tg_cpu_norm_forward_f32(a, tg_data_ptr(x), tg_data_ptr(w), tg_data_ptr(b), r, tg_data_ptr(y),
                                    tg_data_ptr(mean), tg_data_ptr(var), st);
        else
            tg_cpu_norm_forward_f64(a, tg_data_ptr(x), tg_data_ptr(w), tg_data_ptr(b), r, tg_data_ptr(y),
                                    tg_data_ptr(mean), tg_data_ptr(var), st);
    }
    tg_ctx_save(ctx, in[0]);
    tg_ctx_save(ctx, in[1]);
    if (stats) tg_ctx_save(ctx, stats); /* saved 2: on the CPU only */
    if (a->relu) tg_ctx_save(ctx, y);   /* saved 3: the ReLU's mask for backward */
    tg_ctx_set_output(ctx, 1, mean);
    tg_ctx_set_output(ctx, 2, var);
    tg_ctx_mark_non_differentiable(ctx, 1);
    tg_ctx_mark_non_differentiable(ctx, 2);
    return mixed ? tg_cast(y, in[0]->dtype) : y;
}

/* Mixed batch norm, bfloat16 x on the CPU: ops/cpu/norm_bf16.c reads x and writes y in bfloat16
 * (the bits of the float32 kernel on a widened x, rounded once), no float32 copies. */
static tg_tensor *mixed_forward_bf16(tg_ctx *ctx, tg_tensor *const *in) {
    const norm_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_contiguous(in[0]), *w = tg_contiguous(in[1]), *b = tg_contiguous(in[2]);
    if (!x || !w || !b) return NULL;
    tg_opts f32 = {.dtype = TG_FLOAT32};
    tg_tensor *y = tg_empty(x->shape, (tg_opts){.dtype = TG_BFLOAT16});
    tg_tensor *mean = tg_empty(TG_SHAPE(a->groups), f32), *var = tg_empty(TG_SHAPE(a->groups), f32);
    tg_tensor *stats = tg_empty(TG_SHAPE(a->groups, 2), (tg_opts){.dtype = TG_FLOAT64});
    if (!y || !mean || !var || !stats) return NULL;
    tg_bn_forward_bf16(a->outer, a->groups, a->inner, a->eps, tg_data_ptr(x), tg_data_ptr(w), tg_data_ptr(b),
                       tg_data_ptr(y), tg_data_ptr(mean), tg_data_ptr(var), tg_data_ptr(stats));
    tg_ctx_save(ctx, in[0]);
    tg_ctx_save(ctx, in[1]);
    tg_ctx_save(ctx, stats);
    tg_ctx_set_output(ctx, 1, mean);
    tg_ctx_set_output(ctx, 2, var);
    tg_ctx_mark_non_differentiable(ctx, 1);
    tg_ctx_mark_non_differentiable(ctx, 2);
    return y;
}

/* batch_norm_backward: inputs g, x, w (all [.., C, ..] as in forward; contiguous), stats [C, 2]
 * (mean, invstd in double); outputs grad_input, grad_weight, grad_bias. It only runs when
 * the backward is not being recorded (no create_graph): a recorded backward uses the
 * composed-op formula below, which is differentiable to any order, so this function
 * needs no backward of its own. */
typedef struct {
    int64_t outer, channels, inner;
    bool need_input;
} bn_backward_args;

static tg_tensor *bn_backward_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const bn_backward_args *a = tg_ctx_attrs(ctx);
    tg_tensor *g = tg_contiguous(in[0]), *x = tg_contiguous(in[1]), *w = tg_contiguous(in[2]), *st = in[3];
    if (!g || !x || !w) return NULL;
    tg_opts o = {.dtype = x->dtype};
    tg_tensor *gx = a->need_input ? tg_empty(x->shape, o) : tg_zeros(TG_SHAPE(1), o);
    tg_tensor *gw = tg_empty(w->shape, o), *gb = tg_empty(w->shape, o);
    if (!gx || !gw || !gb) return NULL;
    if (x->dtype == TG_FLOAT32)
        tg_cpu_bn_backward_f32(a->outer, a->channels, a->inner, tg_data_ptr(g), tg_data_ptr(x), tg_data_ptr(w),
                               tg_data_ptr(st), a->need_input ? tg_data_ptr(gx) : NULL, tg_data_ptr(gw),
                               tg_data_ptr(gb));
    else
        tg_cpu_bn_backward_f64(a->outer, a->channels, a->inner, tg_data_ptr(g), tg_data_ptr(x), tg_data_ptr(w),
                               tg_data_ptr(st), a->need_input ? tg_data_ptr(gx) : NULL, tg_data_ptr(gw),
                               tg_data_ptr(gb));
    tg_ctx_set_output(ctx, 1, gw);
    tg_ctx_set_output(ctx, 2, gb);
    return gx;
}

static const tg_function bn_backward_fn = {.name = "batch_norm_backward",
                                           .num_inputs = 4,
                                           .forward = bn_backward_forward,
                                           .num_outputs = 3,
                                           .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                           .autocast = TG_AUTOCAST_NONE};

/* The same on bfloat16 g and x (mixed batch norm): gx bfloat16, gw and gb float32. */
static tg_tensor *bn_backward_bf16_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const bn_backward_args *a = tg_ctx_attrs(ctx);
    tg_tensor *g = tg_contiguous(in[0]), *x = tg_contiguous(in[1]), *w = tg_contiguous(in[2]), *st = in[3];
    if (!g || !x || !w) return NULL;
    tg_tensor *gx = a->need_input ? tg_empty(x->shape, (tg_opts){.dtype = TG_BFLOAT16})
                                  : tg_zeros(TG_SHAPE(1), (tg_opts){.dtype = TG_BFLOAT16});
    tg_tensor *gw = tg_empty(w->shape, (tg_opts){0}), *gb = tg_empty(w->shape, (tg_opts){0});
    if (!gx || !gw || !gb) return NULL;
    tg_bn_backward_bf16(a->outer, a->channels, a->inner, tg_data_ptr(g), tg_data_ptr(x), tg_data_ptr(w),
                        tg_data_ptr(st), a->need_input ? tg_data_ptr(gx) : NULL, tg_data_ptr(gw), tg_data_ptr(gb));
    tg_ctx_set_output(ctx, 1, gw);
    tg_ctx_set_output(ctx, 2, gb);
    return gx;
}

static const tg_function bn_backward_bf16_fn = {.name = "batch_norm_backward",
                                                .num_inputs = 4,
                                                .forward = bn_backward_bf16_forward,
                                                .num_outputs = 3,
                                                .low_precision = TG_LOW_PRECISION_NATIVE,
                                                .autocast = TG_AUTOCAST_NONE};

/* layer_norm_backward: the same for layer norm, inputs g, x, w [D] (x [R, D], one dtype, float32
 * or float64), stats [R, 2]; outputs grad_input, grad_weight, grad_bias (ops/cpu/norm.h). */
typedef struct {
    int64_t rows, cols;
    bool need_input, need_weight;
} ln_backward_args;

static tg_tensor *ln_backward_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const ln_backward_args *a = tg_ctx_attrs(ctx);
    tg_tensor *g = tg_contiguous(in[0]), *x = tg_contiguous(in[1]), *w = tg_contiguous(in[2]), *st = in[3];
    if (!g || !x || !w) return NULL;
    tg_opts o = {.dtype = x->dtype};
    tg_tensor *gx = a->need_input ? tg_empty(x->shape, o) : tg_zeros(TG_SHAPE(1), o);
    tg_tensor *gw = a->need_weight ? tg_empty(w->shape, o) : tg_zeros(TG_SHAPE(1), o);
    tg_tensor *gb = a->need_weight ? tg_empty(w->shape, o) : tg_zeros(TG_SHAPE(1), o);
    tg_tensor *part = a->need_weight ? tg_empty(TG_SHAPE(tg_cpu_ln_backward_workspace(a->rows, a->cols)), o) : NULL;
    if (!gx || !gw || !gb || (a->need_weight && !part)) return NULL;
#define LN_BACKWARD_ARGS(T)                                                                        \
    a->rows, a->cols, tg_data_ptr(g), tg_data_ptr(x), tg_data_ptr(w), tg_data_ptr(st),             \
        a->need_input ? (T *)tg_data_ptr(gx) : NULL, a->need_weight ? (T *)tg_data_ptr(gw) : NULL, \
        a->need_weight ? (T *)tg_data_ptr(gb) : NULL, part ? (T *)tg_data_ptr(part) : NULL
    if (x->dtype == TG_FLOAT32) tg_cpu_ln_backward_f32(LN_BACKWARD_ARGS(float));
    else tg_cpu_ln_backward_f64(LN_BACKWARD_ARGS(double));
#undef LN_BACKWARD_ARGS
    tg_ctx_set_output(ctx, 1, gw);
    tg_ctx_set_output(ctx, 2, gb);
    return gx;
}

static const tg_function ln_backward_fn = {.name = "layer_norm_backward",
                                           .num_inputs = 4,
                                           .forward = ln_backward_forward,
                                           .num_outputs = 3,
                                           .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                           .autocast = TG_AUTOCAST_NONE};

/* Layer norm's fused backward (not recorded, float32 or float64 throughout, on the CPU);
 * false when it does not apply. */
static bool layer_norm_backward_fused(tg_ctx *ctx, const norm_args *a, tg_tensor *g, tg_tensor *x, tg_tensor *w,
                                      tg_tensor **grad_in) {
    if (!(x->dtype == TG_FLOAT32 || x->dtype == TG_FLOAT64) || g->dtype != x->dtype || w->dtype != x->dtype)
        return false;
    tg_tensor *stats = tg_ctx_saved(ctx, 2);
    if (!stats) return true; /* the error is recorded */
    ln_backward_args la = {a->groups, a->inner, tg_ctx_needs_input_grad(ctx, 0),
                           tg_ctx_needs_input_grad(ctx, 1) || tg_ctx_needs_input_grad(ctx, 2)};
    tg_tensor *out[3];
    if (tg_apply_multi_args(&ln_backward_fn, (tg_tensor *[]){g, x, w, stats}, &la, sizeof la, out)) return true;
    if (la.need_input) grad_in[0] = out[0];
    if (tg_ctx_needs_input_grad(ctx, 1)) grad_in[1] = out[1];
    if (tg_ctx_needs_input_grad(ctx, 2)) grad_in[2] = out[2];
    return true;
}

static void norm_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const norm_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_ctx_saved(ctx, 0), *w = tg_ctx_saved(ctx, 1);
    if (!x || !w) return;
    bool cpu_unrecorded = x->storage->device.kind == TG_DEVICE_CPU && !tg_is_grad_enabled();
    if (a->layer && cpu_unrecorded && layer_norm_backward_fused(ctx, a, g, x, w, grad_in)) return;
    bool fused = !a->layer && cpu_unrecorded;
    bool fused_bf16 = fused && x->dtype == TG_BFLOAT16 && g->dtype == TG_BFLOAT16;      /* ops/cpu/norm_bf16.c */
    if (!fused_bf16 && tg_dtype_is_low_precision(x->dtype) && w->dtype == TG_FLOAT32) { /* mixed: in float32 */
        x = tg_cast(x, TG_FLOAT32); /* the engine rounds grad_in[0] */
        g = tg_cast(g, TG_FLOAT32);
        if (!x || !g) return;
    }
    if (fused) {
        tg_tensor *stats = tg_ctx_saved(ctx, 2);
        if (!stats) return;
        bn_backward_args ba = {a->outer, a->groups, a->inner, tg_ctx_needs_input_grad(ctx, 0)};
        tg_tensor *out[3];
        if (tg_apply_multi_args(fused_bf16 ? &bn_backward_bf16_fn : &bn_backward_fn, (tg_tensor *[]){g, x, w, stats},
                                &ba, sizeof ba, out))
            return;
        if (ba.need_input) grad_in[0] = out[0];
        if (tg_ctx_needs_input_grad(ctx, 1)) grad_in[1] = out[1];
        if (tg_ctx_needs_input_grad(ctx, 2)) grad_in[2] = out[2];
        return;
    }
    /* The weight broadcasts against x: [1, C, 1, ...] for batch norm, as is for layer norm. */
    tg_shape wshape = x->shape;
    int param_dims[TG_MAX_DIMS], num_param_dims = 0;
    if (a->layer) {
        wshape = w->shape;
        for (int d = 0; d < x->shape.ndim - w->shape.ndim; d++) param_dims[num_param_dims++] = d;
    } else {
        for (int d = 0; d < x->shape.ndim; d++)
            if (d != 1) wshape.dims[d] = 1;
        for (int i = 0; i < a->num_dims; i++) param_dims[num_param_dims++] = a->dims[i];
    }
    const int *dims = a->dims;
    int nd = a->num_dims;
    tg_tensor *mean = tg_mean_dims(x, dims, nd, true);
    tg_tensor *centered = tg_sub(x, mean);
    tg_tensor *invstd = tg_rsqrt(tg_add_scalar(tg_mean_dims(tg_square(centered), dims, nd, true), a->eps));
    tg_tensor *xhat = tg_mul(centered, invstd);
    if (tg_ctx_needs_input_grad(ctx, 0)) {
        tg_tensor *dxhat = tg_mul(g, tg_reshape(w, wshape));
        tg_tensor *inner = tg_sub(tg_sub(dxhat, tg_mean_dims(dxhat, dims, nd, true)),
                                  tg_mul(xhat, tg_mean_dims(tg_mul(dxhat, xhat), dims, nd, true)));
        grad_in[0] = tg_mul(invstd, inner);
    }
    if (tg_ctx_needs_input_grad(ctx, 1))
        grad_in[1] = tg_reshape(tg_sum_dims(tg_mul(g, xhat), param_dims, num_param_dims, false), w->shape);
    if (tg_ctx_needs_input_grad(ctx, 2))
        grad_in[2] = tg_reshape(tg_sum_dims(g, param_dims, num_param_dims, false), w->shape);
}

static const tg_function norm_fn = {.name = "batch_norm",
                                    .num_inputs = 3,
                                    .forward = norm_forward,
                                    .backward = norm_backward,
                                    .num_outputs = 3,
                                    .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                    .autocast = TG_AUTOCAST_NONE};
/* batch_norm_add_relu (CPU, float32 / float64, training; tg_batch_norm_add_relu decides):
 * relu(batch_norm(x, w, b) + residual) by norm_forward with the kernels' epilogue; inputs
 * x, w, b and (bn_add_relu_fn) the residual, outputs as batch_norm's. Backward: the ReLU's
 * mask on the gradient from the saved output (tg_relu_backward), then batch norm's
 * backward on it; the residual's gradient is the masked gradient. */
static void bn_relu_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    tg_tensor *y = tg_ctx_saved(ctx, 3), *masked = y ? tg_relu_backward(g, y) : NULL;
    if (!masked) return;
    norm_backward(ctx, masked, grad_in);
    if (tg_ctx_function(ctx)->num_inputs == 4 && tg_ctx_needs_input_grad(ctx, 3)) grad_in[3] = masked;
}

static const tg_function bn_relu_fn = {.name = "batch_norm_relu",
                                       .num_inputs = 3,
                                       .forward = norm_forward,
                                       .backward = bn_relu_backward,
                                       .num_outputs = 3,
                                       .autocast = TG_AUTOCAST_NONE};
static const tg_function bn_add_relu_fn = {.name = "batch_norm_add_relu",
                                           .num_inputs = 4,
                                           .forward = norm_forward,
                                           .backward = bn_relu_backward,
                                           .num_outputs = 3,
                                           .autocast = TG_AUTOCAST_NONE};

/* Mixed batch norm on the CPU: a bfloat16 / float16 x with float32 weight and bias. The
 * forward widens x for its own use and saves x itself, so the activation kept for
 * backward stays 2-byte; backward widens it again. */
static const tg_function norm_mixed_fn = {.name = "batch_norm",
                                          .num_inputs = 3,
                                          .forward = norm_forward,
                                          .backward = norm_backward,
                                          .num_outputs = 3,
                                          .low_precision = TG_LOW_PRECISION_NATIVE,
                                          .autocast = TG_AUTOCAST_NONE};
/* LayerNormalization (opset 17) over the recorded trailing dims; only Y is written. */
static tg_status layer_norm_onnx(tg_onnx_op *op) {
    const norm_args *a = tg_onnx_attrs(op);
    if (tg_onnx_opset(op) < 17) return tg_onnx_unsupported(op, "LayerNormalization needs opset 17");
    const char *y = tg_onnx_output_name(op, 0);
    tg_onnx_node *n = tg_onnx_add_node(
        op, "LayerNormalization", 3,
        (const char *[]){tg_onnx_input_name(op, 0), tg_onnx_input_name(op, 1), tg_onnx_input_name(op, 2)}, 1, &y);
    tg_onnx_attr_int(n, "axis", a->dims[0]);
    tg_onnx_attr_float(n, "epsilon", (float)a->eps);
    return n ? TG_OK : TG_ERROR;
}

static const tg_function layer_norm_fn = {.name = "layer_norm",
                                          .num_inputs = 3,
                                          .forward = norm_forward,
                                          .backward = norm_backward,
                                          .num_outputs = 3,
                                          .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                          .autocast = TG_AUTOCAST_FLOAT32_ON_CUDA,
                                          .onnx = layer_norm_onnx};

/* weight/bias, or constants of ones/zeros of `shape` when NULL (owned by the scope). */
static tg_tensor *param_or(tg_tensor *p, tg_shape shape, tg_tensor *x, double value) {
    return p ? p : tg_full(shape, value, (tg_opts){.dtype = x->dtype, .device = x->storage->device});
}

/* p (when given) has the expected shape, dtype `dtype` (the input's, or float32 for a
 * mixed batch norm) and x's device. */
static tg_status check_param_of(const char *op, const char *what, tg_tensor *p, tg_tensor *x, tg_shape expected,
                                tg_dtype dtype) {
    if (!p) return TG_OK;
    char a[128], b[128], d1[16], d2[16];
    if (!tg_shape_equal(p->shape, expected))
        return tg_error("%s: expected %s of shape %s for input %s, got %s", op, what,
                        tg_shape_str(expected, a, sizeof a), tg_shape_str(x->shape, b, sizeof b),
                        tg_shape_str(p->shape, d1, sizeof d1));
    if (p->dtype != dtype)
        return tg_error("%s: expected %s of %s %s, got %s", op, what, dtype == x->dtype ? "the input's dtype" : "dtype",
                        tg_dtype_name(dtype), tg_dtype_name(p->dtype));
    if (!tg_device_equal(p->storage->device, x->storage->device))
        return tg_error("%s: expected %s on the input's device %s, got %s", op, what,
                        tg_device_str(x->storage->device, d1), tg_device_str(p->storage->device, d2));
    (void)a;
    return TG_OK;
}

static tg_status check_param(const char *op, const char *what, tg_tensor *p, tg_tensor *x, tg_shape expected) {
    return check_param_of(op, what, p, x, expected, x->dtype);
}

/* Training on the CPU with a low-precision x and float32 parameters (norm_mixed_fn): the
 * float32 path's checks with float32 parameters, then the mixed op. */
static tg_tensor *mixed_batch_norm(tg_tensor *x, tg_tensor *running_mean, tg_tensor *running_var, tg_tensor *weight,
                                   tg_tensor *bias, double momentum, double eps) {
    const char *op = "tg_batch_norm";
    int64_t c = x->shape.dims[1], count = tg_numel(x) / (c ? c : 1);
    tg_shape cshape = TG_SHAPE(c);
    if (check_param_of(op, "weight", weight, x, cshape, TG_FLOAT32) ||
        check_param_of(op, "bias", bias, x, cshape, TG_FLOAT32) ||
        check_param_of(op, "running_mean", running_mean, x, cshape, TG_FLOAT32) ||
        check_param_of(op, "running_var", running_var, x, cshape, TG_FLOAT32))
        return NULL;
    char xs[128];
    if ((running_mean == NULL) != (running_var == NULL))
        return tg_error("%s: expected both running_mean and running_var, or neither", op), NULL;
    if (count <= 1)
        return tg_error("%s: expected more than 1 value per channel when training, got input %s", op,
                        tg_shape_str(x->shape, xs, sizeof xs)),
               NULL;
    norm_args a = {.eps = eps, .outer = x->shape.dims[0], .groups = c, .inner = count / x->shape.dims[0]};
    for (int d = 0; d < x->shape.ndim; d++)
        if (d != 1) a.dims[a.num_dims++] = d;
    tg_opts f32 = {.dtype = TG_FLOAT32, .device = x->storage->device};
    tg_tensor *in[3] = {x, weight ? weight : tg_full(cshape, 1, f32), bias ? bias : tg_full(cshape, 0, f32)};
    tg_tensor *out[3];
    if (!in[1] || !in[2] || tg_apply_multi_args(&norm_mixed_fn, in, &a, sizeof a, out)) return NULL;
    if (running_mean && tg_norm_update_running(running_mean, running_var, out[1], out[2],
                                               (double)count / (double)(count - 1), momentum))
        return NULL;
    return out[0];
}

/* ---- batch norm in evaluation mode ----
 * (x - running_mean) * rsqrt(running_var + eps) * weight + bias, as one op (ONNX's
 * BatchNormalization) computed by the plain ops below, forward and backward, so its
 * numbers and its higher derivatives are theirs. Inputs: x, running_mean,
 * running_var (both detached), weight, bias (ones / zeros when the module has none:
 * then unused, as has_weight / has_bias say). */
typedef struct {
    double eps;
    bool has_weight, has_bias;
} bn_eval_args;

static tg_shape channel_view_shape(tg_shape x) { /* [1, C, 1, ...] */
    for (int d = 0; d < x.ndim; d++)
        if (d != 1) x.dims[d] = 1;
    return x;
}

/* rsqrt(running_var + eps), times the weight when there is one */
static tg_tensor *bn_eval_scale(const bn_eval_args *a, tg_tensor *var, tg_tensor *weight, tg_tensor **rstd) {
    *rstd = tg_rsqrt(tg_add_scalar(var, a->eps));
    return a->has_weight ? tg_mul(*rstd, weight) : *rstd;
}

static tg_tensor *bn_eval_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const bn_eval_args *a = tg_ctx_attrs(ctx);
    tg_shape bshape = channel_view_shape(in[0]->shape);
    for (int i = 0; i < 4; i++) tg_ctx_save(ctx, in[i]);
    tg_tensor *rstd, *scale = bn_eval_scale(a, in[2], in[3], &rstd);
    tg_tensor *out = tg_mul(tg_sub(in[0], tg_reshape(in[1], bshape)), tg_reshape(scale, bshape));
    return a->has_bias ? tg_add(out, tg_reshape(in[4], bshape)) : out;
}

static void bn_eval_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const bn_eval_args *a = tg_ctx_attrs(ctx);
    tg_tensor *x = tg_ctx_saved(ctx, 0), *mean = tg_ctx_saved(ctx, 1), *var = tg_ctx_saved(ctx, 2);
    tg_tensor *weight = tg_ctx_saved(ctx, 3);
    if (!x || !mean || !var || !weight) return;
    tg_shape bshape = channel_view_shape(x->shape), cshape = mean->shape;
    tg_tensor *rstd, *scale = bn_eval_scale(a, var, weight, &rstd);
    if (tg_ctx_needs_input_grad(ctx, 0)) grad_in[0] = tg_mul(g, tg_reshape(scale, bshape));
    if (a->has_weight && tg_ctx_needs_input_grad(ctx, 3)) {
        tg_tensor *centered = tg_sub(x, tg_reshape(mean, bshape));
        grad_in[3] = tg_mul(tg_reshape(tg_sum_to(tg_mul(g, centered), bshape), cshape), rstd);
    }
    if (a->has_bias && tg_ctx_needs_input_grad(ctx, 4)) grad_in[4] = tg_reshape(tg_sum_to(g, bshape), cshape);
}

static tg_status bn_eval_onnx(tg_onnx_op *op) {
    const char *in[5], *y = tg_onnx_output_name(op, 0);
    for (int i = 0; i < 5; i++) in[i] = tg_onnx_input_name(op, (int[]){0, 3, 4, 1, 2}[i]); /* X, scale, B, mean, var */
    tg_onnx_node *n = tg_onnx_add_node(op, "BatchNormalization", 5, in, 1, &y);
    tg_onnx_attr_float(n, "epsilon", (float)((const bn_eval_args *)tg_onnx_attrs(op))->eps);
    return n ? TG_OK : TG_ERROR;
}

static const tg_function bn_eval_fn = {.name = "batch_norm",
                                       .num_inputs = 5,
                                       .forward = bn_eval_forward,
                                       .backward = bn_eval_backward,
                                       .low_precision = TG_LOW_PRECISION_NATIVE,
                                       .autocast = TG_AUTOCAST_NONE,
                                       .onnx = bn_eval_onnx};

/* tg_batch_norm, and tg_batch_norm_add_relu where batch_norm_fuses_relu: relu true runs
 * the fused function (the residual, or NULL, added before the ReLU). */
static tg_tensor *batch_norm(const char *op, tg_tensor *x, tg_tensor *residual, bool relu, tg_tensor *running_mean,
                             tg_tensor *running_var, tg_tensor *weight, tg_tensor *bias, bool training, double momentum,
                             double eps) {
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), NULL;
    char xs[128];
    tg_shape_str(x->shape, xs, sizeof xs);
    if (x->shape.ndim < 2) return tg_error("%s: expected input [N, C, ...] (at least 2-D), got %s", op, xs), NULL;
    if (!tg_dtype_is_floating(x->dtype))
        return tg_error("%s: expected a float32, float64, float16 or bfloat16 input, got %s", op,
                        tg_dtype_name(x->dtype)),
               NULL;
    tg_tensor *given[] = {weight, bias, running_mean, running_var};
    bool float32_params = false;
    for (int i = 0; i < 4; i++) float32_params |= given[i] && given[i]->dtype == TG_FLOAT32;
    if (tg_dtype_is_low_precision(x->dtype) && float32_params) {
        /* PyTorch's mixed batch norm: a float16/bfloat16 input with float32 parameters and
         * statistics (what autocast gives after a conv) is normalised in float32 and
         * rounded once; the running statistics stay float32. */
        tg_tensor *y = NULL;
        if (training && x->storage->device.kind == TG_DEVICE_CPU && (!weight || weight->dtype == TG_FLOAT32) &&
            (!bias || bias->dtype == TG_FLOAT32)) {
            TG_SCOPE {
                y = tg_scope_return(mixed_batch_norm(x, running_mean, running_var, weight, bias, momentum, eps));
            }
            return y;
        }
        TG_SCOPE {
            y = tg_scope_return(tg_cast(
                tg_batch_norm(tg_cast(x, TG_FLOAT32), running_mean, running_var, weight, bias, training, momentum, eps),
                x->dtype));
        }
        return y;
    }
    int64_t c = x->shape.dims[1];
    tg_shape cshape = TG_SHAPE(c);
    if (check_param(op, "weight", weight, x, cshape) || check_param(op, "bias", bias, x, cshape) ||
        check_param(op, "running_mean", running_mean, x, cshape) ||
        check_param(op, "running_var", running_var, x, cshape))
        return NULL;
    if (!training && (!running_mean || !running_var))
        return tg_error("%s: running_mean and running_var must be given in evaluation mode", op), NULL;
    if ((running_mean == NULL) != (running_var == NULL))
        return tg_error("%s: expected both running_mean and running_var, or neither", op), NULL;
    int64_t count = tg_numel(x) / (c ? c : 1);
    if (training && count <= 1)
        return tg_error("%s: expected more than 1 value per channel when training, got input %s", op, xs), NULL;

    tg_tensor *y = NULL;
    TG_SCOPE {
        if (!training) {
            bn_eval_args a = {.eps = eps, .has_weight = weight != NULL, .has_bias = bias != NULL};
            tg_tensor *in[5] = {x, tg_detach(running_mean), tg_detach(running_var), param_or(weight, cshape, x, 1),
                                param_or(bias, cshape, x, 0)};
            y = tg_scope_return(tg_apply_args(&bn_eval_fn, in, &a, sizeof a));
        } else {
            norm_args a = {.eps = eps, .outer = x->shape.dims[0], .groups = c, .inner = count / x->shape.dims[0]};
            for (int d = 0; d < x->shape.ndim; d++)
                if (d != 1) a.dims[a.num_dims++] = d;
            a.relu = relu;
            tg_tensor *in[4] = {x, param_or(weight, cshape, x, 1), param_or(bias, cshape, x, 0), residual};
            const tg_function *fn = !relu ? &norm_fn : residual ? &bn_add_relu_fn : &bn_relu_fn;
            tg_tensor *out[3];
            if (!tg_apply_multi_args(fn, in, &a, sizeof a, out)) {
                /* out[2] is the biased variance normalising used; running_var takes the unbiased one */
                if (!running_mean || !tg_norm_update_running(running_mean, running_var, out[1], out[2],
                                                             (double)count / (double)(count - 1), momentum))
                    y = tg_scope_return(out[0]);
            }
        }
    }
    return y;
}

tg_tensor *tg_batch_norm(tg_tensor *x, tg_tensor *running_mean, tg_tensor *running_var, tg_tensor *weight,
                         tg_tensor *bias, bool training, double momentum, double eps) {
    return batch_norm("tg_batch_norm", x, NULL, false, running_mean, running_var, weight, bias, training, momentum,
                      eps);
}

/* The fused kernels' cases: training on the CPU in float32 or float64, the parameters of
 * x's dtype (or absent), the residual (if any) of x's shape, dtype and device. */
static bool batch_norm_fuses_relu(tg_tensor *x, tg_tensor *residual, tg_tensor *weight, tg_tensor *bias,
                                  bool training) {
    bool ok = training && x->storage->device.kind == TG_DEVICE_CPU &&
              (x->dtype == TG_FLOAT32 || x->dtype == TG_FLOAT64) && (!weight || weight->dtype == x->dtype) &&
              (!bias || bias->dtype == x->dtype);
    return ok && (!residual || (residual->dtype == x->dtype && tg_shape_equal(residual->shape, x->shape) &&
                                tg_device_equal(residual->storage->device, x->storage->device)));
}

tg_tensor *tg_batch_norm_add_relu(tg_tensor *x, tg_tensor *residual, tg_tensor *running_mean, tg_tensor *running_var,
                                  tg_tensor *weight, tg_tensor *bias, bool training, double momentum, double eps) {
    const char *op = "tg_batch_norm_add_relu";
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), NULL;
    if (residual && tg_unusable_(residual)) return tg_error_unusable_input(op, residual, 1), NULL;
    if (batch_norm_fuses_relu(x, residual, weight, bias, training))
        return batch_norm(op, x, residual, true, running_mean, running_var, weight, bias, training, momentum, eps);
    tg_tensor *y = NULL; /* the composed ops: the same values */
    TG_SCOPE {
        tg_tensor *n = tg_batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps);
        if (n && residual) n = tg_add(n, residual);
        if (n) y = tg_scope_return(tg_relu(n));
    }
    return y;
}

tg_tensor *tg_layer_norm(tg_tensor *x, int normalized_ndim, tg_tensor *weight, tg_tensor *bias, double eps) {
    const char *op = "tg_layer_norm";
    if (tg_unusable_(x)) return tg_error_unusable_input(op, x, 0), NULL;
    char xs[128];
    tg_shape_str(x->shape, xs, sizeof xs);
    if (normalized_ndim < 1 || normalized_ndim > x->shape.ndim)
        return tg_error("%s: expected 1 <= normalized_ndim <= %d for input %s, got %d", op, x->shape.ndim, xs,
                        normalized_ndim),
               NULL;
    if (!tg_dtype_is_floating(x->dtype))
        return tg_error("%s: expected a float32, float64, float16 or bfloat16 input, got %s", op,
                        tg_dtype_name(x->dtype)),
               NULL;
    int lead = x->shape.ndim - normalized_ndim;
    tg_shape nshape = tg_shape_from(normalized_ndim, x->shape.dims + lead);
    if (check_param(op, "weight", weight, x, nshape) || check_param(op, "bias", bias, x, nshape)) return NULL;
    int64_t inner = tg_shape_numel(nshape), rows = inner ? tg_numel(x) / inner : 0;
    if (inner == 0) return tg_error("%s: the normalized dims of input %s are empty", op, xs), NULL;
    norm_args a = {.eps = eps, .outer = 1, .groups = rows, .inner = inner, .layer = true};
    for (int d = lead; d < x->shape.ndim; d++) a.dims[a.num_dims++] = d;
    tg_tensor *y = NULL;
    TG_SCOPE {
        tg_tensor *in[3] = {x, param_or(weight, nshape, x, 1), param_or(bias, nshape, x, 0)};
        tg_tensor *out[3];
        if (!tg_apply_multi_args(&layer_norm_fn, in, &a, sizeof a, out)) y = tg_scope_return(out[0]);
    }
    return y;
}
