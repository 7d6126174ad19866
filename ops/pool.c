/* 2-D pooling: max, avg, adaptive avg. Definitions and backward; kernels in
 * ops/cpu/pool.c and ops/cuda/pool.cu. Tensors are [N, C, H, W] (a [C, H, W] input is
 * unsqueezed); kernels walk contiguous [planes, H, W], the N*C planes.
 *
 * Each backward is itself a tg_function whose backward is the forward's linear
 * part, so pooling is differentiable to any order:
 *   max:  y = gather(x, argmax)      dx = scatter_add(g, argmax)   ddg = gather(gg, argmax)
 *   avg:  y = A x  (A: window sums / divisor)   dx = A^T g         ddg = A gg
 * Windows, taps, divisors and the NaN rule: ops/pool_window.h, shared with the CUDA kernels. */
#include "ops/pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/function.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "onnx/graph.h"
#include "ops/cuda/pool.h"
#include "ops/dispatch.h"
#include "ops/cpu/pool.h"
#include "ops/pool_window.h"
#include "ops/reduce.h"
#include "ops/shape.h"

typedef tg_pool_geometry pool_params; /* ops/pool_window.h: shared with both devices' kernels */

/* PyTorch's pooling_output_shape (aten/src/ATen/native/Pool.h). */
static int64_t pool_out_size(int64_t in, int k, int s, int p, int d, bool ceil_mode) {
    int64_t num = in + 2 * (int64_t)p - (int64_t)d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t out = (num < 0 ? -((-num + s - 1) / s) : num / s) + 1;
    if (ceil_mode && (out - 1) * s >= in + p) out--;
    return out;
}

static tg_tensor *contig(tg_tensor *t) { return tg_is_contiguous(t) ? t : tg_contiguous(t); }

static tg_tensor *new_like_planes(tg_tensor *t, int64_t h, int64_t w, tg_dtype dtype) {
    return tg_empty(TG_SHAPE(t->shape.dims[0], t->shape.dims[1], h, w),
                    (tg_opts){.dtype = dtype, .device = t->storage->device});
}

/* ======================= max pooling ======================= */

static tg_tensor *max_scatter_apply(tg_tensor *g, tg_tensor *idx, const pool_params *q);
static tg_tensor *max_scatter_bf16_apply(tg_tensor *g, tg_tensor *idx, const pool_params *q);
static tg_tensor *max_gather_apply(tg_tensor *g, tg_tensor *idx, const pool_params *q);

/* max_pool_fn's (float32 and float64, either device) and max_pool_bf16_fn's (bfloat16
 * on the CPU). */
static tg_tensor *max_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const pool_params *q = tg_ctx_attrs(ctx);
    tg_tensor *x = contig(in[0]);
    if (!x) return NULL;
    tg_tensor *y = new_like_planes(x, q->ho, q->wo, x->dtype), *idx = new_like_planes(x, q->ho, q->wo, TG_INT64);
    if (!y || !idx) return NULL;
    int64_t planes = x->shape.dims[0] * x->shape.dims[1];
    if (x->dtype == TG_BFLOAT16) tg_cpu_max_pool_bf16(q, planes, tg_data_ptr(x), tg_data_ptr(y), tg_data_ptr(idx));
    else if (TG_DEVICE_DISPATCH(x, TG_CUDA_CALL("tg_max_pool2d", tg_cuda_max_pool2d_forward, y, idx, x, q),
                                tg_cpu_max_pool_f32, tg_cpu_max_pool_f64, q, planes, tg_data_ptr(x), tg_data_ptr(y),
                                tg_data_ptr(idx)))
        return NULL;
    tg_ctx_save(ctx, idx); /* a saved non-differentiable output is kept without graph link */
    tg_ctx_set_output(ctx, 1, idx);
    tg_ctx_mark_non_differentiable(ctx, 1);
    return y;
}

static void max_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    tg_tensor *idx = tg_ctx_saved(ctx, 0);
    if (idx) grad_in[0] = max_scatter_apply(g, idx, tg_ctx_attrs(ctx));
}

/* The two linear maps of max pooling's derivatives, on in[0] and the indices in[1]:
 * scatter, the backward (g [N, C, Ho, Wo] added at the indices into zeros
 * [N, C, H, W]), and gather, the double backward ([N, C, H, W] -> [N, C, Ho, Wo]
 * picked at the indices). Each is the other's derivative. bfloat16 comes only to
 * scatter, on the CPU (max_scatter_bf16_fn). */
static tg_tensor *max_index_map(tg_ctx *ctx, tg_tensor *const *in, bool scatter) {
    const pool_params *q = tg_ctx_attrs(ctx);
    tg_tensor *g = contig(in[0]), *idx = contig(in[1]);
    if (!g || !idx) return NULL;
    tg_ctx_save(ctx, in[1]);
    tg_tensor *out = scatter ? new_like_planes(g, q->h, q->w, g->dtype) : new_like_planes(g, q->ho, q->wo, g->dtype);
    if (!out) return NULL;
    int64_t planes = g->shape.dims[0] * g->shape.dims[1], in_hw = q->h * q->w, out_hw = q->ho * q->wo;
    tg_status status = TG_OK;
    if (g->dtype == TG_BFLOAT16) tg_cpu_max_unpool_bf16(q, planes, tg_data_ptr(g), tg_data_ptr(idx), tg_data_ptr(out));
    else if (scatter)
        status = TG_DEVICE_DISPATCH(g, TG_CUDA_CALL("tg_max_pool2d backward", tg_cuda_max_pool2d_backward, out, g, idx),
                                    tg_cpu_max_unpool_f32, tg_cpu_max_unpool_f64, planes, in_hw, out_hw, tg_data_ptr(g),
                                    tg_data_ptr(idx), tg_data_ptr(out));
    else
        status =
            TG_DEVICE_DISPATCH(g, TG_CUDA_CALL("tg_max_pool2d double backward", tg_cuda_max_pool2d_gather, out, g, idx),
                               tg_cpu_max_gather_f32, tg_cpu_max_gather_f64, planes, in_hw, out_hw, tg_data_ptr(g),
                               tg_data_ptr(idx), tg_data_ptr(out));
    return status ? NULL : out;
}

static tg_tensor *max_scatter_forward(tg_ctx *ctx, tg_tensor *const *in) { return max_index_map(ctx, in, true); }
static tg_tensor *max_gather_forward(tg_ctx *ctx, tg_tensor *const *in) { return max_index_map(ctx, in, false); }

static void max_scatter_backward(tg_ctx *ctx, tg_tensor *gg, tg_tensor **grad_in) {
    tg_tensor *idx = tg_ctx_saved(ctx, 0);
    if (idx) grad_in[0] = max_gather_apply(gg, idx, tg_ctx_attrs(ctx));
}

static void max_gather_backward(tg_ctx *ctx, tg_tensor *gg, tg_tensor **grad_in) {
    tg_tensor *idx = tg_ctx_saved(ctx, 0);
    if (idx) grad_in[0] = max_scatter_apply(gg, idx, tg_ctx_attrs(ctx));
}

/* MaxPool / AveragePool with the recorded geometry: ceil_mode when the output is the
 * larger of the two sizes. Output 1 of max pooling (the indices) is not written. */
static tg_status pool_onnx(tg_onnx_op *op) {
    const pool_params *q = tg_onnx_attrs(op);
    bool max = tg_onnx_num_outputs(op) == 2;
    const char *x = tg_onnx_input_name(op, 0), *y = tg_onnx_output_name(op, 0);
    if (q->adaptive) {
        if (q->ho == 1 && q->wo == 1) return tg_onnx_add_node(op, "GlobalAveragePool", 1, &x, 1, &y) ? TG_OK : TG_ERROR;
        if (q->h % q->ho || q->w % q->wo)
            return tg_onnx_unsupported(op, "adaptive pooling to a size that does not divide the input's");
    }
    int kh = q->adaptive ? (int)(q->h / q->ho) : q->kh, kw = q->adaptive ? (int)(q->w / q->wo) : q->kw;
    int sh = q->adaptive ? kh : q->sh, sw = q->adaptive ? kw : q->sw;
    int64_t floor_h = (q->h + 2 * q->ph - q->dh * (kh - 1) - 1) / sh + 1;
    int64_t floor_w = (q->w + 2 * q->pw - q->dw * (kw - 1) - 1) / sw + 1;
    tg_onnx_node *n = tg_onnx_add_node(op, max ? "MaxPool" : "AveragePool", 1, &x, 1, &y);
    tg_onnx_attr_ints(n, "kernel_shape", (int64_t[]){kh, kw}, 2);
    tg_onnx_attr_ints(n, "strides", (int64_t[]){sh, sw}, 2);
    tg_onnx_attr_ints(n, "pads", (int64_t[]){q->ph, q->pw, q->ph, q->pw}, 4);
    if (max && (q->dh != 1 || q->dw != 1)) tg_onnx_attr_ints(n, "dilations", (int64_t[]){q->dh, q->dw}, 2);
    if (!max && q->include_pad) tg_onnx_attr_int(n, "count_include_pad", 1);
    if (q->ho != floor_h || q->wo != floor_w) tg_onnx_attr_int(n, "ceil_mode", 1);
    return n ? TG_OK : TG_ERROR;
}

static const tg_function max_pool_fn = {.name = "max_pool2d",
                                        .num_inputs = 1,
                                        .forward = max_forward,
                                        .backward = max_backward,
                                        .num_outputs = 2,
                                        .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                        .autocast = TG_AUTOCAST_NONE,
                                        .onnx = pool_onnx};
static const tg_function max_scatter_fn = {.name = "max_pool2d_backward",
                                           .num_inputs = 2,
                                           .forward = max_scatter_forward,
                                           .backward = max_scatter_backward,
                                           .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                           .autocast = TG_AUTOCAST_NONE};
static const tg_function max_gather_fn = {.name = "max_pool2d_gather",
                                          .num_inputs = 2,
                                          .forward = max_gather_forward,
                                          .backward = max_gather_backward,
                                          .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                          .autocast = TG_AUTOCAST_NONE};

/* bfloat16 on the CPU (what autocast gives after a bfloat16 convolution): the float32
 * kernels a plane at a time (tg_cpu_max_pool_bf16), no float32 copy of the whole tensor.
 * Max pooling picks elements, so the results are the float32 op's on the widened tensor,
 * rounded exactly; its backward adds in float32 per plane and rounds each element once,
 * as the float32 op followed by a cast. Double backward (max_gather) stays the widened
 * float32 op. */
static void max_backward_bf16(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    tg_tensor *idx = tg_ctx_saved(ctx, 0);
    if (!idx) return;
    bool native = g->dtype == TG_BFLOAT16 && g->storage->device.kind == TG_DEVICE_CPU;
    grad_in[0] =
        native ? max_scatter_bf16_apply(g, idx, tg_ctx_attrs(ctx)) : max_scatter_apply(g, idx, tg_ctx_attrs(ctx));
}

static const tg_function max_pool_bf16_fn = {.name = "max_pool2d",
                                             .num_inputs = 1,
                                             .forward = max_forward,
                                             .backward = max_backward_bf16,
                                             .num_outputs = 2,
                                             .low_precision = TG_LOW_PRECISION_NATIVE,
                                             .autocast = TG_AUTOCAST_NONE,
                                             .onnx = pool_onnx};
static const tg_function max_scatter_bf16_fn = {.name = "max_pool2d_backward",
                                                .num_inputs = 2,
                                                .forward = max_scatter_forward,
                                                .backward = max_scatter_backward,
                                                .low_precision = TG_LOW_PRECISION_NATIVE,
                                                .autocast = TG_AUTOCAST_NONE};

static tg_tensor *max_scatter_bf16_apply(tg_tensor *g, tg_tensor *idx, const pool_params *q) {
    return tg_apply_args(&max_scatter_bf16_fn, (tg_tensor *[]){g, idx}, q, sizeof *q);
}

static tg_tensor *max_scatter_apply(tg_tensor *g, tg_tensor *idx, const pool_params *q) {
    return tg_apply_args(&max_scatter_fn, (tg_tensor *[]){g, idx}, q, sizeof *q);
}
static tg_tensor *max_gather_apply(tg_tensor *g, tg_tensor *idx, const pool_params *q) {
    return tg_apply_args(&max_gather_fn, (tg_tensor *[]){g, idx}, q, sizeof *q);
}

/* ======================= average pooling ======================= */

static tg_tensor *avg_apply(tg_tensor *x, const pool_params *q);
static tg_tensor *avg_backward_apply(tg_tensor *g, const pool_params *q);

/* Average pooling's two linear maps: y = A x, the forward ([N, C, H, W] -> [N, C, Ho, Wo]),
 * and gx = A^T g, the backward (the reverse). Each is the other's derivative. */
static tg_tensor *avg_map(tg_ctx *ctx, tg_tensor *const *in, bool transposed) {
    const pool_params *q = tg_ctx_attrs(ctx);
    tg_tensor *x = contig(in[0]);
    if (!x) return NULL;
    tg_tensor *y = transposed ? new_like_planes(x, q->h, q->w, x->dtype) : new_like_planes(x, q->ho, q->wo, x->dtype);
    if (!y) return NULL;
    int64_t planes = x->shape.dims[0] * x->shape.dims[1];
    tg_status status =
        transposed
            ? TG_DEVICE_DISPATCH(x, TG_CUDA_CALL("tg_avg_pool2d backward", tg_cuda_avg_pool2d_backward, y, x, q),
                                 tg_cpu_avg_unpool_f32, tg_cpu_avg_unpool_f64, q, planes, tg_data_ptr(x),
                                 tg_data_ptr(y))
            : TG_DEVICE_DISPATCH(x, TG_CUDA_CALL("tg_avg_pool2d", tg_cuda_avg_pool2d_forward, y, x, q),
                                 tg_cpu_avg_pool_f32, tg_cpu_avg_pool_f64, q, planes, tg_data_ptr(x), tg_data_ptr(y));
    return status ? NULL : y;
}

static tg_tensor *avg_forward(tg_ctx *ctx, tg_tensor *const *in) { return avg_map(ctx, in, false); }
static tg_tensor *avg_backward_forward(tg_ctx *ctx, tg_tensor *const *in) { return avg_map(ctx, in, true); }

static void avg_forward_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    grad_in[0] = avg_backward_apply(g, tg_ctx_attrs(ctx));
}

static void avg_backward_backward(tg_ctx *ctx, tg_tensor *gg, tg_tensor **grad_in) {
    grad_in[0] = avg_apply(gg, tg_ctx_attrs(ctx));
}

static const tg_function avg_pool_fn = {.name = "avg_pool2d",
                                        .num_inputs = 1,
                                        .forward = avg_forward,
                                        .backward = avg_forward_backward,
                                        .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                        .autocast = TG_AUTOCAST_NONE,
                                        .onnx = pool_onnx};
static const tg_function adaptive_pool_fn = {.name = "adaptive_avg_pool2d",
                                             .num_inputs = 1,
                                             .forward = avg_forward,
                                             .backward = avg_forward_backward,
                                             .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                             .autocast = TG_AUTOCAST_NONE,
                                             .onnx = pool_onnx};
static const tg_function avg_pool_backward_fn = {.name = "avg_pool2d_backward",
                                                 .num_inputs = 1,
                                                 .forward = avg_backward_forward,
                                                 .backward = avg_backward_backward,
                                                 .low_precision = TG_LOW_PRECISION_IN_FLOAT32,
                                                 .autocast = TG_AUTOCAST_NONE};

static tg_tensor *avg_apply(tg_tensor *x, const pool_params *q) {
    return tg_apply_args(q->adaptive ? &adaptive_pool_fn : &avg_pool_fn, &x, q, sizeof *q);
}
static tg_tensor *avg_backward_apply(tg_tensor *g, const pool_params *q) {
    return tg_apply_args(&avg_pool_backward_fn, &g, q, sizeof *q);
}

/* ======================= public entries ======================= */

static tg_status check_input(const char *op, tg_tensor *x) {
    char buf[128];
    if (x->shape.ndim != 3 && x->shape.ndim != 4)
        return tg_error("%s: expected input [N, C, H, W] or [C, H, W], got %s", op,
                        tg_shape_str(x->shape, buf, sizeof buf));
    if (!tg_dtype_is_floating(x->dtype))
        return tg_error("%s: expected a float32, float64, float16 or bfloat16 input, got %s", op,
                        tg_dtype_name(x->dtype));
    for (int d = 1; d < x->shape.ndim; d++)
        if (x->shape.dims[d] == 0)
            return tg_error("%s: expected non-empty C, H and W, got input %s", op,
                            tg_shape_str(x->shape, buf, sizeof buf));
    return TG_OK;
}

/* Output index of a window (along a dim of size `in`) with no tap inside the input, or -1.
 * Only dilation makes one (taps that jump over a small input); padding <= kernel/2
 * keeps every undilated window on the input. */
static int64_t empty_window(int64_t in, int64_t out, int k, int s, int p, int d) {
    for (int64_t o = 0; d > 1 && o < out; o++) {
        int64_t start = o * s - p, first = tg_pool_first_tap(start, d);
        if (first >= in || first > start + (int64_t)(k - 1) * d) return o;
    }
    return -1;
}

static tg_pair pair_or(tg_pair pair, int scalar) { return pair.h || pair.w ? pair : (tg_pair){scalar, scalar}; }

/* "3" for a square value, "(3, 1)" for a per-dim one, as PyTorch prints them. */
static const char *pair_text(tg_pair v, char *buf, size_t size) {
    if (v.h == v.w) snprintf(buf, size, "%d", v.h);
    else snprintf(buf, size, "(%d, %d)", v.h, v.w);
    return buf;
}

/* max: whether dilation is an option (it is not avg_pool2d's). */
static tg_status pool_params_from(const char *op, tg_tensor *x, tg_pool_opts o, bool max, pool_params *q) {
    tg_pair k = pair_or(o.kernel_sizes, o.kernel_size), pad = pair_or(o.paddings, o.padding);
    tg_pair st = pair_or(o.strides, o.stride), dil = pair_or(o.dilations, o.dilation);
    if (st.h == 0 && st.w == 0) st = k; /* PyTorch's default stride: the kernel */
    if (dil.h == 0 && dil.w == 0) dil = (tg_pair){1, 1};
    char ks[24], ss[24], ps[24], ds[24];
    pair_text(k, ks, sizeof ks), pair_text(st, ss, sizeof ss), pair_text(pad, ps, sizeof ps);
    pair_text(dil, ds, sizeof ds);
    if (k.h <= 0 || k.w <= 0 || st.h <= 0 || st.w <= 0 || pad.h < 0 || pad.w < 0)
        return tg_error("%s: expected kernel_size > 0, stride > 0 and padding >= 0, got kernel_size %s, stride %s, "
                        "padding %s",
                        op, ks, ss, ps);
    if (dil.h <= 0 || dil.w <= 0) return tg_error("%s: dilation should be greater than zero, got %s", op, ds);
    if (!max && (dil.h != 1 || dil.w != 1))
        return tg_error("%s: dilation is a max_pool2d option (avg_pool2d has none), got %s", op, ds);
    /* half the kernel, not of the dilated span, as ATen's pool2d_shape_check */
    if (pad.h > k.h / 2 || pad.w > k.w / 2)
        return tg_error("%s: padding %s should be at most half of kernel_size %s", op, ps, ks);
    int nd = x->shape.ndim;
    int64_t h = x->shape.dims[nd - 2], w = x->shape.dims[nd - 1];
    int64_t ho = pool_out_size(h, k.h, st.h, pad.h, dil.h, o.ceil_mode);
    int64_t wo = pool_out_size(w, k.w, st.w, pad.w, dil.w, o.ceil_mode);
    char buf[128], dil_text[40] = "";
    tg_shape_str(x->shape, buf, sizeof buf);
    if (dil.h != 1 || dil.w != 1) snprintf(dil_text, sizeof dil_text, ", dilation %s", ds);
    if (ho < 1 || wo < 1)
        return tg_error("%s: output would be empty: input %s with kernel_size %s, stride %s, padding %s%s gives "
                        "%lldx%lld",
                        op, buf, ks, ss, ps, dil_text, (long long)(ho > 0 ? ho : 0), (long long)(wo > 0 ? wo : 0));
    *q = (pool_params){.include_pad = !o.count_exclude_pad,
                       .kh = k.h,
                       .kw = k.w,
                       .sh = st.h,
                       .sw = st.w,
                       .ph = pad.h,
                       .pw = pad.w,
                       .dh = dil.h,
                       .dw = dil.w,
                       .h = h,
                       .w = w,
                       .ho = ho,
                       .wo = wo};
    int64_t empty_h = empty_window(h, ho, k.h, st.h, pad.h, dil.h),
            empty_w = empty_window(w, wo, k.w, st.w, pad.w, dil.w);
    if (empty_h >= 0 || empty_w >= 0)
        return tg_error("%s: input %s with kernel_size %s, stride %s, padding %s%s: the window of output %s %lld "
                        "has no tap inside the input",
                        op, buf, ks, ss, ps, dil_text, empty_h >= 0 ? "row" : "column",
                        (long long)(empty_h >= 0 ? empty_h : empty_w));
    return TG_OK;
}

tg_tensor *tg_max_pool2d(tg_tensor *x, tg_pool_opts opts, tg_tensor **indices) {
    if (indices) *indices = NULL;
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_max_pool2d", x, 0), NULL;
    pool_params q;
    if (check_input("tg_max_pool2d", x) || pool_params_from("tg_max_pool2d", x, opts, true, &q)) return NULL;
    tg_tensor *out[2] = {NULL, NULL};
    TG_SCOPE {
        bool batched = x->shape.ndim == 4;
        tg_tensor *x4 = batched ? x : tg_unsqueeze(x, 0);
        bool bf16 = x->dtype == TG_BFLOAT16 && x->storage->device.kind == TG_DEVICE_CPU;
        if (!tg_apply_multi_args(bf16 ? &max_pool_bf16_fn : &max_pool_fn, &x4, &q, sizeof q, out)) {
            out[0] = tg_scope_return(batched ? out[0] : tg_squeeze(out[0], 0));
            /* Unwanted indices stay in this scope and are freed with it. */
            if (indices) *indices = tg_scope_return(batched ? out[1] : tg_squeeze(out[1], 0));
        } else {
            out[0] = NULL;
        }
    }
    return out[0];
}

static tg_tensor *avg_public(tg_tensor *x, const pool_params *q) {
    tg_tensor *y = NULL;
    TG_SCOPE {
        bool batched = x->shape.ndim == 4;
        tg_tensor *out = avg_apply(batched ? x : tg_unsqueeze(x, 0), q);
        y = tg_scope_return(batched ? out : tg_squeeze(out, 0));
    }
    return y;
}

tg_tensor *tg_avg_pool2d(tg_tensor *x, tg_pool_opts opts) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_avg_pool2d", x, 0), NULL;
    pool_params q;
    if (check_input("tg_avg_pool2d", x) || pool_params_from("tg_avg_pool2d", x, opts, false, &q)) return NULL;
    return avg_public(x, &q);
}

tg_tensor *tg_adaptive_avg_pool2d(tg_tensor *x, int64_t out_h, int64_t out_w) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_adaptive_avg_pool2d", x, 0), NULL;
    if (check_input("tg_adaptive_avg_pool2d", x)) return NULL;
    if (out_h <= 0 || out_w <= 0)
        return tg_error("tg_adaptive_avg_pool2d: expected an output size > 0, got %lldx%lld", (long long)out_h,
                        (long long)out_w),
               NULL;
    int nd = x->shape.ndim;
    /* Global average pooling (ResNet's head) is a mean over H and W, as ATen computes it. */
    if (out_h == 1 && out_w == 1) return tg_mean_dims(x, (const int[]){-2, -1}, 2, true);
    pool_params q = {.adaptive = true,
                     .include_pad = true,
                     .dh = 1,
                     .dw = 1,
                     .h = x->shape.dims[nd - 2],
                     .w = x->shape.dims[nd - 1],
                     .ho = out_h,
                     .wo = out_w};
    return avg_public(x, &q);
}
