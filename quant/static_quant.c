/* Static quantisation (quant/static_quant.h): stubs, fused modules, prepare's observers,
 * convert's walk, and the int8 modules over ops/cpu/qconv.h. */
#include "quant/static_quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/scope.h"
#include "core/tensor_impl.h"
#include "quant/fake_quantize.h"
#include "nn/layers.h"
#include "onnx/graph.h"
#include "onnx/recording.h"
#include "quant/observer.h"
#include "ops/elementwise.h"
#include "ops/cpu/qconv.h"
#include "ops/shape.h"

static const char *type_name(tg_module *m) {
    const tg_module_type *t = m ? tg_module_type_of(m) : NULL;
    return !m ? "NULL" : t && t->name ? t->name : "Module";
}
static bool is_type(tg_module *m, const char *name) { return m && !strcmp(type_name(m), name); }

/* The int8 modules' forwards: their kernels, or one recorded op while tg_onnx_export
 * records (the ONNX section below). */
static tg_tensor *quantize_forward(tg_module *self, tg_tensor *x);
static tg_tensor *dequantize_forward(tg_module *self, tg_tensor *x);
static tg_tensor *qmax_pool_forward(tg_module *self, tg_tensor *x);
static tg_tensor *qlayer_forward(tg_module *self, tg_tensor *x);

/* ---- qconfigs ---- */

static tg_module *histogram_activation(void) { return tg_nn_histogram_observer((tg_observer_opts){0}); }
static tg_module *histogram_activation_rr(void) {
    return tg_nn_histogram_observer((tg_observer_opts){.reduce_range = true});
}
static tg_module *per_channel_weight(void) {
    return tg_nn_per_channel_minmax_observer(
        (tg_observer_opts){.dtype = TG_QINT8, .qscheme = TG_PER_CHANNEL_SYMMETRIC});
}
static tg_module *per_tensor_weight(void) {
    return tg_nn_minmax_observer((tg_observer_opts){.dtype = TG_QINT8, .qscheme = TG_PER_TENSOR_SYMMETRIC});
}

tg_qconfig tg_get_default_qconfig(const char *backend) {
    if (backend && !strcmp(backend, "onednn")) return (tg_qconfig){histogram_activation, per_channel_weight};
    if (backend && (!strcmp(backend, "x86") || !strcmp(backend, "fbgemm")))
        return (tg_qconfig){histogram_activation_rr, per_channel_weight};
    if (backend && !strcmp(backend, "qnnpack")) return (tg_qconfig){histogram_activation, per_tensor_weight};
    tg_error("tg_get_default_qconfig: unknown backend \"%s\" (onednn, x86, fbgemm or qnnpack)",
             backend ? backend : "(NULL)");
    return (tg_qconfig){NULL, NULL};
}

/* ---- stubs, wrapper, fused modules ---- */

static tg_tensor *identity_forward(tg_module *self, tg_tensor *x) { return tg_scope_track(tg_retain(x)); }
static const tg_module_type quant_stub_type = {.name = "QuantStub", .forward = identity_forward};
static const tg_module_type dequant_stub_type = {.name = "DeQuantStub", .forward = identity_forward};

tg_module *tg_nn_quant_stub(void) { return tg_module_new(&quant_stub_type, 0); }
tg_module *tg_nn_dequant_stub(void) { return tg_module_new(&dequant_stub_type, 0); }

static tg_tensor *wrapper_forward(tg_module *self, tg_tensor *x) {
    x = tg_forward(tg_module_child(self, "quant"), x);
    x = x ? tg_forward(tg_module_child(self, "module"), x) : NULL;
    return x ? tg_forward(tg_module_child(self, "dequant"), x) : NULL;
}
static const tg_module_type wrapper_type = {.name = "QuantWrapper", .forward = wrapper_forward};

tg_module *tg_quant_wrapper(tg_module *module) {
    if (!module) {
        tg_error("tg_quant_wrapper: module is NULL");
        return NULL;
    }
    tg_module *w = tg_module_new(&wrapper_type, 0);
    if (tg_register_module(w, "quant", tg_nn_quant_stub()) || tg_register_module(w, "dequant", tg_nn_dequant_stub())) {
        tg_module_free(w);
        tg_module_free(module);
        return NULL;
    }
    if (tg_register_module(w, "module", module)) {
        tg_module_free(w);
        return NULL;
    }
    return w;
}

static tg_tensor *fused_forward(tg_module *self, tg_tensor *x) {
    x = tg_forward(tg_module_child(self, "0"), x);
    return x ? tg_forward(tg_module_child(self, "1"), x) : NULL;
}
static const tg_module_type conv_relu_type = {.name = "ConvReLU2d", .forward = fused_forward};
static const tg_module_type linear_relu_type = {.name = "LinearReLU", .forward = fused_forward};

/* The parent of the module at `dotted` and the last component (a pointer into dotted). */
static tg_module *resolve_parent(tg_module *model, const char *dotted, const char **leaf) {
    char part[256];
    tg_module *m = model;
    const char *p = dotted;
    for (const char *dot; (dot = strchr(p, '.'));) {
        size_t n = (size_t)(dot - p);
        if (n >= sizeof part) return NULL;
        memcpy(part, p, n);
        part[n] = 0;
        m = tg_module_child(m, part);
        if (!m) return NULL;
        p = dot + 1;
    }
    *leaf = p;
    return tg_module_child(m, p) ? m : NULL;
}

tg_status tg_fuse_modules(tg_module *model, const char *first, const char *second) {
    const char *op = "tg_fuse_modules";
    if (!model || !first || !second) return tg_error("%s: model and names must not be NULL", op);
    const char *leaf1, *leaf2;
    tg_module *p1 = resolve_parent(model, first, &leaf1), *p2 = resolve_parent(model, second, &leaf2);
    if (!p1 || !p2) return tg_error("%s: no module \"%s\" in the model", op, p1 ? second : first);
    if (p1 != p2) return tg_error("%s: \"%s\" and \"%s\" must be children of one module", op, first, second);
    tg_module *a = tg_module_child(p1, leaf1), *b = tg_module_child(p1, leaf2);
    bool conv = is_type(a, "Conv2d"), linear = is_type(a, "Linear");
    if ((!conv && !linear) || !is_type(b, "ReLU"))
        return tg_error("%s: can fuse Conv2d + ReLU or Linear + ReLU, got %s (\"%s\") + %s (\"%s\")", op, type_name(a),
                        first, type_name(b), second);
    tg_module *fused = tg_module_new(conv ? &conv_relu_type : &linear_relu_type, 0);
    tg_module *moved = tg_module_swap_child(p1, leaf1, fused);
    if (!moved) return TG_ERROR;
    if (tg_register_module(fused, "0", moved)) return TG_ERROR;
    tg_module *relu = tg_module_swap_child(p1, leaf2, tg_nn_identity());
    if (!relu) return TG_ERROR;
    return tg_register_module(fused, "1", relu);
}

/* ---- prepare ---- */

static bool observed_type(tg_module *m) {
    static const char *const names[] = {"QuantStub", "Conv2d",    "Linear",        "ConvReLU2d",   "LinearReLU",
                                        "QATConv2d", "QATLinear", "QATConvReLU2d", "QATLinearReLU"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (is_type(m, names[i])) return true;
    return false;
}

static tg_status observe_output(tg_module *m, tg_tensor *input, tg_tensor **output, void *user) {
    tg_tensor *y = tg_forward(tg_module_child(m, "activation_post_process"), *output);
    if (!y) return TG_ERROR;
    *output = y;
    return TG_OK;
}

/* Adds the activation observer to m (an observed type). */
static tg_status attach_observer(tg_module *m, tg_qconfig q) {
    if (tg_module_child(m, "activation_post_process")) return TG_OK;
    tg_module *obs = q.activation();
    if (!obs) return TG_ERROR;
    if (tg_register_module(m, "activation_post_process", obs)) return TG_ERROR;
    return tg_register_forward_hook(m, observe_output, NULL).id ? TG_OK : TG_ERROR;
}

static tg_status prepare_walk(tg_module *m, tg_qconfig q) {
    for (int i = 0; i < tg_module_num_children(m); i++) {
        tg_module *c = tg_module_child_at(m, i, NULL);
        if (observed_type(c)) {
            if (attach_observer(c, q)) return TG_ERROR;
        } else if (!is_type(c, "DeQuantStub") && !tg_is_observer(c) && !tg_is_fake_quantize(c)) {
            if (prepare_walk(c, q)) return TG_ERROR;
        }
    }
    return TG_OK;
}

tg_status tg_quant_prepare(tg_module *model, tg_qconfig qconfig) {
    if (!model || !qconfig.activation || !qconfig.weight)
        return tg_error("tg_quant_prepare: model and both qconfig functions must not be NULL");
    if (observed_type(model)) return attach_observer(model, qconfig);
    return prepare_walk(model, qconfig);
}

/* ---- the int8 modules ---- */

/* A tensor of one float32 or int64 value, registered as a buffer. */
static tg_status register_scalar(tg_module *m, const char *name, double v, tg_dtype dt) {
    tg_status st = TG_ERROR;
    TG_SCOPE {
        float f = (float)v;
        int64_t i = (int64_t)v;
        st = tg_register_buffer(
            m, name,
            tg_from_data(dt == TG_FLOAT32 ? (const void *)&f : (const void *)&i, TG_SHAPE(1), (tg_opts){.dtype = dt}));
    }
    return st;
}

/* A buffer's first value, read on the host. */
static double buffer_value(tg_module *m, const char *name) {
    double v = NAN;
    TG_SCOPE {
        tg_tensor *t = tg_contiguous(tg_cast(tg_tensor_to(tg_module_buffer(m, name), TG_CPU), TG_FLOAT64));
        if (t && tg_numel(t) > 0) v = *(const double *)tg_data_ptr(t);
    }
    return v;
}

static tg_status check_cpu(const char *who, tg_tensor *x, tg_dtype dt, const char *what) {
    if (tg_device_of(x).kind == TG_DEVICE_CPU &&
        (dt == TG_FLOAT32 ? tg_dtype_is_floating(tg_dtype_of(x)) : tg_dtype_of(x) == dt))
        return TG_OK;
    char dev[16];
    return tg_error("%s: expected %s on the CPU, got %s on %s", who, what, tg_dtype_name(tg_dtype_of(x)),
                    tg_device_str(tg_device_of(x), dev));
}

/* The scale and zero point held in two buffers, read once per change of either
 * (a forward would otherwise pay for two host reads). */
typedef struct {
    bool valid;
    uint64_t versions[2];
    float scale;
    int32_t zero_point;
} cached_qparams;

static cached_qparams *qparams_of(tg_module *self, const char *scale_name, const char *zp_name) {
    cached_qparams *c = tg_module_state(self);
    uint64_t v0 = tg_version(tg_module_buffer(self, scale_name)), v1 = tg_version(tg_module_buffer(self, zp_name));
    if (!c->valid || c->versions[0] != v0 || c->versions[1] != v1) {
        c->scale = (float)buffer_value(self, scale_name);
        c->zero_point = (int32_t)buffer_value(self, zp_name);
        c->versions[0] = v0;
        c->versions[1] = v1;
        c->valid = true;
    }
    return c;
}

/* Quantize: float -> quint8, as quantize_per_tensor (quantize_val: zp + nearbyint(x * (1 / scale))). */
static tg_tensor *quantize_compute(tg_module *self, tg_tensor *x) {
    if (check_cpu("Quantize", x, TG_FLOAT32, "a floating input")) return NULL;
    const cached_qparams *q = qparams_of(self, "scale", "zero_point");
    const float inv = 1.0f / q->scale, zp = (float)q->zero_point;
    tg_tensor *xc = tg_contiguous(tg_dtype_of(x) == TG_FLOAT32 ? x : tg_cast(x, TG_FLOAT32));
    tg_tensor *y = xc ? tg_empty(tg_shape_of(x), (tg_opts){.dtype = TG_UINT8}) : NULL;
    if (!y) return NULL;
    const float *xv = tg_data_ptr(xc);
    uint8_t *yv = tg_data_ptr(y);
    float bad = 0.f; /* x * 0 sums to NaN exactly when some x is NaN or Inf: checked in this pass */
    int64_t n = tg_numel(xc);
    for (int64_t i = 0; i < n; i++) {
        float v = zp + nearbyintf(xv[i] * inv);
        yv[i] = (uint8_t)(int32_t)(v >= 0.f ? (v > 255.f ? 255.f : v) : 0.f); /* NaN: 0, no undefined cast */
        bad += xv[i] * 0.f;
    }
    if (bad != 0.f) {
        /* quint8 has no NaN or Inf; PyTorch's quantize_per_tensor writes 0 for both */
        int64_t i = 0;
        while (i < n && isfinite(xv[i])) i++;
        char buf[64];
        tg_error("Quantize: input %s holds %g at flat index %lld: quint8 cannot hold NaN or Inf",
                 tg_shape_str(tg_shape_of(x), buf, sizeof buf), (double)xv[i], (long long)i);
        return NULL;
    }
    return y;
}
static const tg_module_type quantize_type = {.name = "Quantize", .forward = quantize_forward};

/* DeQuantize: quint8 -> float32, (q - zp) * scale. */
static tg_tensor *dequantize_compute(tg_module *self, tg_tensor *x) {
    if (check_cpu("DeQuantize", x, TG_UINT8, "a uint8 (quint8) input")) return NULL;
    const cached_qparams *q = qparams_of(self, "input_scale", "input_zero_point");
    tg_tensor *xc = tg_contiguous(x);
    tg_tensor *y = xc ? tg_empty(tg_shape_of(x), (tg_opts){.dtype = TG_FLOAT32}) : NULL;
    if (!y) return NULL;
    const uint8_t *xv = tg_data_ptr(xc);
    float *yv = tg_data_ptr(y);
    for (int64_t i = 0, n = tg_numel(xc); i < n; i++) yv[i] = q->scale * (float)((int32_t)xv[i] - q->zero_point);
    return y;
}
static const tg_module_type dequantize_type = {.name = "DeQuantize", .forward = dequantize_forward};

/* QuantizedMaxPool2d: the max of quint8 values is the quint8 of the max (same scale
 * and zero point); output size as max_pool2d's (ceil_mode included). */
static tg_tensor *qmax_pool_compute(tg_module *self, tg_tensor *x) {
    if (check_cpu("QuantizedMaxPool2d", x, TG_UINT8, "a uint8 (quint8) input")) return NULL;
    const tg_pool_opts *o = tg_module_state(self);
    tg_shape s = tg_shape_of(x);
    int k = o->kernel_size, stride = o->stride ? o->stride : k, pad = o->padding, dil = o->dilation ? o->dilation : 1;
    int64_t out[2];
    for (int d = 0; d < 2 && s.ndim >= 3; d++) {
        int64_t in = s.dims[s.ndim - 2 + d], span = in + 2 * pad - dil * (k - 1) - 1 + (o->ceil_mode ? stride - 1 : 0);
        out[d] = span < 0 ? 0 : span / stride + 1;
        if (o->ceil_mode && out[d] > 0 && (out[d] - 1) * stride >= in + pad) out[d]--;
    }
    if (s.ndim < 3 || out[0] <= 0 || out[1] <= 0 || 2 * pad > k) {
        char buf[64];
        tg_shape_str(s, buf, sizeof buf);
        tg_error("QuantizedMaxPool2d: input %s is too small for kernel_size=%d, padding=%d (or padding > "
                 "kernel_size / 2)",
                 buf, k, pad);
        return NULL;
    }
    tg_tensor *xc = tg_contiguous(x);
    tg_shape ys = s;
    ys.dims[s.ndim - 2] = out[0];
    ys.dims[s.ndim - 1] = out[1];
    tg_tensor *y = xc ? tg_empty(ys, (tg_opts){.dtype = TG_UINT8}) : NULL;
    if (!y) return NULL;
    int64_t h = s.dims[s.ndim - 2], w = s.dims[s.ndim - 1], planes = h * w > 0 ? tg_numel(xc) / (h * w) : 0;
    tg_qmax_pool2d_u8(planes, h, w, out[0], out[1], k, stride, pad, dil, tg_data_ptr(xc), tg_data_ptr(y));
    return y;
}
static const tg_module_type qmax_pool_type = {.name = "QuantizedMaxPool2d", .forward = qmax_pool_forward};

typedef struct {
    bool conv, relu;
    int64_t out, in, kh, kw; /* in: input channels (conv) or features (linear) */
    int stride, padding, dilation;
    tg_qweights qw;
    tg_qrequant rq;
    bool built;
    uint64_t versions; /* sum of the buffers' versions when qw and rq were made */
} qlayer_state;

static const char *const qlayer_buffers[] = {"weight",     "bias",        "weight_scale",    "scale",
                                             "zero_point", "input_scale", "input_zero_point"};

static tg_qrequant requant_of(tg_module *self) {
    qlayer_state *s = tg_module_state(self);
    return (tg_qrequant){.x_scale = (float)buffer_value(self, "input_scale"),
                         .y_scale = (float)buffer_value(self, "scale"),
                         .x_zero_point = (int32_t)buffer_value(self, "input_zero_point"),
                         .y_zero_point = (int32_t)buffer_value(self, "zero_point"),
                         .relu = s->relu};
}

/* Rebuilds the kernel's weights when a buffer was written (made, or loaded). */
static tg_status sync_qlayer(tg_module *self) {
    qlayer_state *s = tg_module_state(self);
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof qlayer_buffers / sizeof *qlayer_buffers; i++) {
        tg_tensor *b = tg_module_buffer(self, qlayer_buffers[i]);
        if (b) v += tg_version(b) + 1;
    }
    if (s->built && v == s->versions) return TG_OK;
    tg_status st = TG_ERROR;
    TG_SCOPE {
        tg_tensor *w = tg_contiguous(tg_tensor_to(tg_module_buffer(self, "weight"), TG_CPU));
        tg_tensor *ws = tg_contiguous(tg_tensor_to(tg_module_buffer(self, "weight_scale"), TG_CPU));
        tg_tensor *b = tg_module_buffer(self, "bias");
        tg_tensor *bc = b ? tg_contiguous(tg_cast(tg_tensor_to(b, TG_CPU), TG_FLOAT32)) : NULL;
        int64_t k = s->conv ? s->in * s->kh * s->kw : s->in;
        if (w && ws && (!b || bc) && tg_numel(w) == s->out * k && tg_numel(ws) == s->out) {
            int8_t *q = malloc((size_t)(s->out * k > 0 ? s->out * k : 1));
            TG_ASSERT(q != NULL);
            const uint8_t *u = tg_data_ptr(w);
            for (int64_t i = 0; i < s->out * k; i++) q[i] = (int8_t)((int32_t)u[i] - 128);
            if (s->built) tg_qweights_free(&s->qw);
            s->rq = requant_of(self);
            s->built = tg_qweights_init(&s->qw, s->out, k, q, tg_data_ptr(ws), bc ? tg_data_ptr(bc) : NULL, s->rq);
            free(q);
            st = s->built ? TG_OK : tg_error("%s: out of memory", type_name(self));
        } else if (w && ws) {
            st = tg_error("%s: weight or weight_scale has the wrong number of elements", type_name(self));
        }
    }
    if (!st) s->versions = v;
    return st;
}

static tg_tensor *qlayer_compute(tg_module *self, tg_tensor *x) {
    qlayer_state *s = tg_module_state(self);
    const char *who = type_name(self);
    if (check_cpu(who, x, TG_UINT8, "a uint8 (quint8) input")) return NULL;
    tg_shape shape = tg_shape_of(x);
    char buf[64];
    if (s->conv ? shape.ndim != 4 || shape.dims[1] != s->in : shape.ndim < 1 || shape.dims[shape.ndim - 1] != s->in) {
        tg_shape_str(shape, buf, sizeof buf);
        tg_error("%s: expected an input of shape %s%lld%s, got %s", who, s->conv ? "[N, " : "[..., ", (long long)s->in,
                 s->conv ? ", H, W]" : "]", buf);
        return NULL;
    }
    if (sync_qlayer(self)) return NULL;
    tg_tensor *xc = tg_contiguous(x);
    if (!xc) return NULL;
    tg_qrequant rq = s->rq;
    if (!s->conv) {
        int64_t rows = s->in ? tg_numel(xc) / s->in : 0;
        shape.dims[shape.ndim - 1] = s->out;
        tg_tensor *y = tg_empty(shape, (tg_opts){.dtype = TG_UINT8});
        if (y) tg_qlinear_u8(&s->qw, rq, rows, tg_data_ptr(xc), tg_data_ptr(y));
        return y;
    }
    int64_t h = shape.dims[2], w = shape.dims[3];
    int64_t oh = (h + 2 * s->padding - s->dilation * (s->kh - 1) - 1) / s->stride + 1;
    int64_t ow = (w + 2 * s->padding - s->dilation * (s->kw - 1) - 1) / s->stride + 1;
    if (oh <= 0 || ow <= 0) {
        tg_shape_str(shape, buf, sizeof buf);
        tg_error("%s: input %s is smaller than the kernel %lldx%lld", who, buf, (long long)s->kh, (long long)s->kw);
        return NULL;
    }
    tg_tensor *y = tg_empty(TG_SHAPE(shape.dims[0], s->out, oh, ow), (tg_opts){.dtype = TG_UINT8});
    if (y)
        tg_qconv2d_u8(&s->qw, rq, shape.dims[0], s->in, h, w, (int)s->kh, (int)s->kw, s->stride, s->padding,
                      s->dilation, tg_data_ptr(xc), tg_data_ptr(y));
    return y;
}

static void qlayer_free(tg_module *self) {
    qlayer_state *s = tg_module_state(self);
    if (s->built) tg_qweights_free(&s->qw);
}

static void qlayer_repr(tg_module *self, char *buf, size_t size) {
    qlayer_state *s = tg_module_state(self);
    double scale = buffer_value(self, "scale"), zp = buffer_value(self, "zero_point");
    if (s->conv)
        snprintf(buf, size, "%lld, %lld, kernel_size=(%lld, %lld), stride=(%d, %d), scale=%g, zero_point=%.0f",
                 (long long)s->in, (long long)s->out, (long long)s->kh, (long long)s->kw, s->stride, s->stride, scale,
                 zp);
    else
        snprintf(buf, size,
                 "in_features=%lld, out_features=%lld, scale=%g, zero_point=%.0f, "
                 "qscheme=torch.per_channel_affine",
                 (long long)s->in, (long long)s->out, scale, zp);
}

/* ---- ONNX export: QDQ (onnx/recording.h) ----
 *
 * tapegrad's activations between the int8 modules are uint8 tensors of quint8 values,
 * which are ONNX's uint8 values of QuantizeLinear / DequantizeLinear with the module's
 * scale and zero point: Quantize is QuantizeLinear, DeQuantize DequantizeLinear,
 * QuantizedMaxPool2d a MaxPool of the uint8 values, and an int8 Conv2d / Linear (ReLU)
 * DequantizeLinear of its input and of its int8 weight (per output channel, zero point
 * 0), the float Conv / Gemm with the float bias, Relu, and QuantizeLinear to its
 * output's scale and zero point: the QDQ form that ONNX Runtime runs as QLinearConv /
 * QGemm. */
typedef tg_tensor *(*qmodule_compute)(tg_module *self, tg_tensor *x);
typedef struct {
    tg_module *module;
    qmodule_compute compute;
} qmodule_args;

static tg_tensor *qmodule_op_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const qmodule_args *a = tg_ctx_attrs(ctx);
    return a->compute(a->module, in[0]);
}

/* A scalar quantisation parameter: float32 scale or uint8 zero point, from a buffer. */
static const char *qparam(tg_onnx_op *op, tg_module *m, const char *name, bool zero_point) {
    return tg_onnx_const_scalar(op, zero_point ? TG_UINT8 : TG_FLOAT32, buffer_value(m, name));
}

/* out = DequantizeLinear(x) with m's buffers `scale` / `zp`, into a fresh value or `to`. */
static const char *qdq(tg_onnx_op *op, const char *type, const char *x, tg_module *m, const char *scale, const char *zp,
                       const char *to) {
    const char *out = to ? to : tg_onnx_value(op);
    const char *in[3] = {x, qparam(op, m, scale, false), qparam(op, m, zp, true)};
    return tg_onnx_add_node(op, type, 3, in, 1, &out) ? out : NULL;
}

static tg_status qlayer_onnx(tg_onnx_op *op, tg_module *m, const char *x, const char *y) {
    qlayer_state *s = tg_module_state(m);
    if (sync_qlayer(m)) return TG_ERROR;
    const char *xd = qdq(op, "DequantizeLinear", x, m, "input_scale", "input_zero_point", NULL);
    /* the weight's int8 values (stored + 128) and its per-channel scales, zero points 0 */
    tg_tensor *w = tg_contiguous(tg_tensor_to(tg_module_buffer(m, "weight"), TG_CPU));
    tg_tensor *b = tg_module_buffer(m, "bias");
    if (!w) return TG_ERROR;
    int64_t count = tg_numel(w);
    int8_t *q = malloc((size_t)(count > 0 ? count : 1)), *zeros = calloc((size_t)s->out + 1, 1);
    TG_ASSERT(q && zeros);
    for (int64_t i = 0; i < count; i++) q[i] = (int8_t)((int32_t)((const uint8_t *)tg_data_ptr(w))[i] - 128);
    const char *wq = tg_onnx_const_int8(op, tg_shape_of(w), q), *wzp = tg_onnx_const_int8(op, TG_SHAPE(s->out), zeros);
    free(q);
    free(zeros);
    const char *ws = tg_onnx_const_tensor(op, tg_module_buffer(m, "weight_scale"));
    const char *bias = b ? tg_onnx_const_tensor(op, tg_cast(b, TG_FLOAT32)) : NULL;
    const char *wd = tg_onnx_value(op), *acc = tg_onnx_value(op);
    tg_onnx_node *n = tg_onnx_add_node(op, "DequantizeLinear", 3, (const char *[]){wq, ws, wzp}, 1, &wd);
    tg_onnx_attr_int(n, "axis", 0);
    if (!n || !xd || (b && !bias)) return TG_ERROR;
    if (s->conv) {
        n = tg_onnx_add_node(op, "Conv", b ? 3 : 2, (const char *[]){xd, wd, bias}, 1, &acc);
        tg_onnx_attr_ints(n, "kernel_shape", (const int64_t[]){s->kh, s->kw}, 2);
        tg_onnx_attr_ints(n, "strides", (const int64_t[]){s->stride, s->stride}, 2);
        tg_onnx_attr_ints(n, "pads", (const int64_t[]){s->padding, s->padding, s->padding, s->padding}, 4);
        tg_onnx_attr_ints(n, "dilations", (const int64_t[]){s->dilation, s->dilation}, 2);
    } else if (tg_ndim(tg_onnx_input(op, 0)) == 2) {
        n = tg_onnx_add_node(op, "Gemm", b ? 3 : 2, (const char *[]){xd, wd, bias}, 1, &acc);
        tg_onnx_attr_int(n, "transB", 1);
    } else { /* [..., in] */
        const char *wt = tg_onnx_value(op), *mm = b ? tg_onnx_value(op) : acc;
        n = tg_onnx_add_node(op, "Transpose", 1, &wd, 1, &wt);
        n = n ? tg_onnx_add_node(op, "MatMul", 2, (const char *[]){xd, wt}, 1, &mm) : NULL;
        if (n && b) n = tg_onnx_add_node(op, "Add", 2, (const char *[]){mm, bias}, 1, &acc);
    }
    if (!n) return TG_ERROR;
    if (s->relu) {
        const char *r = tg_onnx_value(op);
        if (!tg_onnx_add_node(op, "Relu", 1, &acc, 1, &r)) return TG_ERROR;
        acc = r;
    }
    return qdq(op, "QuantizeLinear", acc, m, "scale", "zero_point", y) ? TG_OK : TG_ERROR;
}

static tg_status qmodule_onnx(tg_onnx_op *op) {
    tg_module *m = ((const qmodule_args *)tg_onnx_attrs(op))->module;
    const char *x = tg_onnx_input_name(op, 0), *y = tg_onnx_output_name(op, 0);
    tg_status st = TG_ERROR;
    tg_op_observer paused = tg_onnx_pause(); /* reading buffers runs ops: not the model's */
    TG_SCOPE {
        if (is_type(m, "Quantize")) {
            if (tg_dtype_of(tg_onnx_input(op, 0)) != TG_FLOAT32) {
                const char *xf = tg_onnx_value(op);
                tg_onnx_attr_int(tg_onnx_add_node(op, "Cast", 1, &x, 1, &xf), "to", tg_onnx_dtype(TG_FLOAT32));
                x = xf;
            }
            st = qdq(op, "QuantizeLinear", x, m, "scale", "zero_point", y) ? TG_OK : TG_ERROR;
        } else if (is_type(m, "DeQuantize")) {
            st = qdq(op, "DequantizeLinear", x, m, "input_scale", "input_zero_point", y) ? TG_OK : TG_ERROR;
        } else if (is_type(m, "QuantizedMaxPool2d")) { /* on the uint8 values: same scale and zero point */
            const tg_pool_opts *o = tg_module_state(m);
            int64_t k = o->kernel_size, stride = o->stride ? o->stride : k, pad = o->padding;
            int64_t dil = o->dilation ? o->dilation : 1;
            tg_onnx_node *n = tg_onnx_add_node_same(op, "MaxPool");
            tg_onnx_attr_ints(n, "kernel_shape", (const int64_t[]){k, k}, 2);
            tg_onnx_attr_ints(n, "strides", (const int64_t[]){stride, stride}, 2);
            tg_onnx_attr_ints(n, "pads", (const int64_t[]){pad, pad, pad, pad}, 4);
            tg_onnx_attr_ints(n, "dilations", (const int64_t[]){dil, dil}, 2);
            if (o->ceil_mode) tg_onnx_attr_int(n, "ceil_mode", 1);
            st = n ? TG_OK : TG_ERROR;
        } else {
            st = qlayer_onnx(op, m, x, y);
        }
    }
    tg_onnx_resume(paused);
    return st;
}

static const tg_function qmodule_op = {.name = "quantized_module",
                                       .num_inputs = 1,
                                       .forward = qmodule_op_forward,
                                       .low_precision = TG_LOW_PRECISION_NATIVE,
                                       .onnx = qmodule_onnx};

static tg_tensor *recorded(tg_module *self, tg_tensor *x, qmodule_compute compute) {
    if (!tg_onnx_recording()) return compute(self, x);
    qmodule_args a = {self, compute};
    return tg_apply_args(&qmodule_op, &x, &a, sizeof a);
}
static tg_tensor *quantize_forward(tg_module *self, tg_tensor *x) { return recorded(self, x, quantize_compute); }
static tg_tensor *dequantize_forward(tg_module *self, tg_tensor *x) { return recorded(self, x, dequantize_compute); }
static tg_tensor *qmax_pool_forward(tg_module *self, tg_tensor *x) { return recorded(self, x, qmax_pool_compute); }
static tg_tensor *qlayer_forward(tg_module *self, tg_tensor *x) { return recorded(self, x, qlayer_compute); }

static const tg_module_type qconv_type = {"QuantizedConv2d", qlayer_forward, qlayer_free, qlayer_repr};
static const tg_module_type qconv_relu_type = {"QuantizedConvReLU2d", qlayer_forward, qlayer_free, qlayer_repr};
static const tg_module_type qlinear_type = {"QuantizedLinear", qlayer_forward, qlayer_free, qlayer_repr};
static const tg_module_type qlinear_relu_type = {"QuantizedLinearReLU", qlayer_forward, qlayer_free, qlayer_repr};

/* ---- convert ---- */

typedef struct {
    bool quantised; /* the activation flowing here is quint8 */
    double scale;
    int64_t zero_point;
} act_qparams;

/* tg_quant_convert_for_load: placeholders instead of observed qparams. */
static _Thread_local bool skeleton;

/* The qparams that observer (an observer or a FakeQuantize) gives; error if it saw nothing. */
static tg_status observed_qparams(const char *path, tg_module *obs, double *scale, int64_t *zp) {
    if (skeleton) {
        *scale = 1.0;
        *zp = 0;
        return TG_OK;
    }
    if (tg_is_fake_quantize(obs)) obs = tg_module_child(obs, "activation_post_process");
    tg_status st = TG_ERROR;
    TG_SCOPE {
        tg_tensor *lo = tg_module_buffer(obs, "min_val");
        tg_tensor *s, *z;
        tg_tensor *hi = tg_module_buffer(obs, "max_val");
        double min = lo && tg_numel(lo) ? tg_item(tg_cast(lo, TG_FLOAT64)) : INFINITY;
        double max = hi && tg_numel(hi) ? tg_item(tg_cast(hi, TG_FLOAT64)) : -INFINITY;
        if (min == INFINITY && max == -INFINITY) {
            st = tg_error("tg_quant_convert: \"%s\" was not calibrated (its observer saw no input)", path);
        } else if (!isfinite(min) || !isfinite(max)) {
            st = tg_error("tg_quant_convert: \"%s\": its observer saw NaN or Inf (min_val %g, max_val %g): "
                          "no finite scale quantises that",
                          path, min, max);
        } else if (!tg_observer_calculate_qparams(obs, &s, &z)) {
            *scale = tg_item(s);
            *zp = (int64_t)tg_item(z);
            st = isfinite(*scale) && *scale > 0
                     ? TG_OK
                     : tg_error("tg_quant_convert: \"%s\": the observer gives scale %g", path, *scale);
        }
    }
    return st;
}

/* The per-channel int8 weight of a float layer: quantised with a fresh weight
 * observer (PTQ) or the module's weight_fake_quant (QAT). Writes a uint8 (q + 128)
 * tensor and float32 scales into the current scope. */
static tg_status quantize_weight(const char *path, tg_module *layer, tg_module *inner, tg_qconfig qc, tg_tensor **wq,
                                 tg_tensor **wscale) {
    tg_tensor *w = tg_module_param(inner, "weight");
    if (!w || tg_dtype_of(w) != TG_FLOAT32 || tg_device_of(w).kind != TG_DEVICE_CPU)
        return tg_error("tg_quant_convert: \"%s\" needs a float32 CPU weight", path);
    tg_status fin = TG_OK;
    TG_SCOPE {
        tg_tensor *wc = tg_contiguous(tg_detach(w));
        const float *wv = wc ? tg_data_ptr(wc) : NULL;
        int64_t n = wc ? tg_numel(wc) : 0, i = 0;
        while (i < n && isfinite(wv[i])) i++;
        if (!wc) fin = TG_ERROR;
        else if (i < n)
            fin = tg_error("tg_quant_convert: \"%s%s.weight\" holds %g at flat index %lld: a weight with NaN or "
                           "Inf cannot be quantised",
                           path, inner == layer ? "" : ".0", (double)wv[i], (long long)i);
    }
    if (fin) return fin;
    tg_module *fq = tg_module_child(layer, "weight_fake_quant"), *obs = NULL;
    bool own = false;
    if (fq) { /* from_float runs it once more on the weight, then reads its observer */
        if (!tg_forward(fq, tg_detach(w))) return TG_ERROR;
        obs = tg_module_child(fq, "activation_post_process");
    } else {
        if (!qc.weight) return tg_error("tg_quant_convert: the qconfig has no weight observer");
        obs = qc.weight();
        own = true;
        if (!obs || !tg_forward(obs, tg_detach(w))) {
            if (own) tg_module_free(obs);
            return TG_ERROR;
        }
    }
    tg_observer_info info;
    tg_status st = tg_observer_get_info(obs, &info);
    if (!st && (info.qscheme != TG_PER_CHANNEL_SYMMETRIC || info.dtype != TG_QINT8 || info.ch_axis != 0))
        st = tg_error("tg_quant_convert: \"%s\": the int8 kernels take per-channel symmetric qint8 weights "
                      "(ch_axis 0), the weight observer is %s",
                      path, type_name(obs));
    tg_tensor *scale = NULL, *zp = NULL;
    if (!st) st = tg_observer_calculate_qparams(obs, &scale, &zp);
    if (own) tg_module_free(obs);
    if (st) return st;
    int64_t out = tg_size(w, 0), k = out ? tg_numel(w) / out : 0;
    if (tg_numel(scale) != out)
        return tg_error("tg_quant_convert: \"%s\": %lld weight scales for %lld channels", path,
                        (long long)tg_numel(scale), (long long)out);
    tg_tensor *wc = tg_contiguous(tg_detach(w));
    if (!wc) return TG_ERROR;
    const float *wv = tg_data_ptr(wc), *sv = tg_data_ptr(scale);
    uint8_t *q = malloc((size_t)(out * k > 0 ? out * k : 1));
    TG_ASSERT(q != NULL);
    for (int64_t o = 0; o < out; o++) {
        const float inv = 1.0f / sv[o]; /* quantize_val */
        for (int64_t p = 0; p < k; p++) {
            int64_t v = (int64_t)nearbyintf(wv[o * k + p] * inv);
            q[o * k + p] = (uint8_t)((v < -128 ? -128 : v > 127 ? 127 : v) + 128);
        }
    }
    *wq = tg_from_data(q, tg_shape_of(w), (tg_opts){.dtype = TG_UINT8});
    free(q);
    *wscale = scale;
    return *wq ? TG_OK : TG_ERROR;
}

/* The int8 version of an observed Conv2d / Linear (plain, fused with ReLU, or QAT). */
static tg_module *make_qlayer(const char *path, tg_module *layer, act_qparams in, tg_qconfig qc) {
    const char *t = type_name(layer);
    bool relu = strstr(t, "ReLU") != NULL, conv = strstr(t, "Conv") != NULL;
    tg_module *inner = tg_module_child(layer, "0") ? tg_module_child(layer, "0") : layer;
    double scale;
    int64_t zp;
    if (observed_qparams(path, tg_module_child(layer, "activation_post_process"), &scale, &zp)) return NULL;
    tg_conv_opts co = {0};
    if (conv) {
        if (tg_module_child(layer, "weight_fake_quant")) {
            co = *(tg_conv_opts *)tg_module_state(layer); /* QAT modules keep the Conv2d's options */
        } else if (tg_nn_conv2d_get_opts(inner, &co)) {
            return NULL;
        }
        if (co.groups > 1) {
            tg_error("tg_quant_convert: \"%s\": grouped convolutions have no int8 kernel here", path);
            return NULL;
        }
        bool per_dim = co.strides.h || co.strides.w || co.paddings.h || co.paddings.w || co.dilations.h ||
                       co.dilations.w || co.kernel_sizes.h || co.kernel_sizes.w;
        if (per_dim || co.padding_same || co.padding_mode != TG_PAD_CONSTANT) {
            tg_error("tg_quant_convert: \"%s\": per-dim sizes, padding='same' and padding modes other than zeros "
                     "have no int8 kernel here",
                     path);
            return NULL;
        }
    }
    tg_module *q = NULL;
    tg_status st = TG_ERROR;
    TG_SCOPE {
        tg_tensor *wq = NULL, *ws = NULL;
        if (quantize_weight(path, layer, inner, qc, &wq, &ws)) break;
        const tg_module_type *type =
            conv ? (relu ? &qconv_relu_type : &qconv_type) : (relu ? &qlinear_relu_type : &qlinear_type);
        q = tg_module_new(type, sizeof(qlayer_state));
        qlayer_state *s = tg_module_state(q);
        tg_shape ws_shape = tg_shape_of(wq);
        *s = (qlayer_state){.conv = conv,
                            .relu = relu,
                            .out = ws_shape.dims[0],
                            .in = ws_shape.dims[1],
                            .kh = conv ? ws_shape.dims[2] : 1,
                            .kw = conv ? ws_shape.dims[3] : 1,
                            .stride = co.stride ? co.stride : 1,
                            .padding = co.padding,
                            .dilation = co.dilation ? co.dilation : 1};
        tg_tensor *bias = tg_module_param(inner, "bias");
        st = tg_register_buffer(q, "weight", wq);
        if (!st && bias) st = tg_register_buffer(q, "bias", tg_clone(tg_detach(bias)));
        if (!st) st = tg_register_buffer(q, "weight_scale", ws);
        if (!st)
            st = tg_register_buffer(q, "weight_zero_point", tg_zeros(tg_shape_of(ws), (tg_opts){.dtype = TG_INT64}));
        if (!st) st = register_scalar(q, "scale", scale, TG_FLOAT32);
        if (!st) st = register_scalar(q, "zero_point", (double)zp, TG_INT64);
        if (!st) st = register_scalar(q, "input_scale", in.scale, TG_FLOAT32);
        if (!st) st = register_scalar(q, "input_zero_point", (double)in.zero_point, TG_INT64);
        if (!st) st = sync_qlayer(q);
    }
    if (st) {
        if (q) tg_module_free(q);
        return NULL;
    }
    return q;
}

static tg_status convert_children(tg_module *m, const char *prefix, act_qparams *a, tg_qconfig qc);

static tg_status convert_child(tg_module *parent, const char *name, const char *prefix, act_qparams *a, tg_qconfig qc) {
    char path[512];
    snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name);
    tg_module *c = tg_module_child(parent, name);
    bool observed = tg_module_child(c, "activation_post_process") != NULL;
    if (is_type(c, "QuantStub")) {
        double scale;
        int64_t zp;
        if (!observed)
            return tg_error("tg_quant_convert: QuantStub \"%s\" has no observer (tg_quant_prepare first)", path);
        if (observed_qparams(path, tg_module_child(c, "activation_post_process"), &scale, &zp)) return TG_ERROR;
        tg_module *q = tg_module_new(&quantize_type, sizeof(cached_qparams));
        if (register_scalar(q, "scale", scale, TG_FLOAT32) || register_scalar(q, "zero_point", (double)zp, TG_INT64)) {
            tg_module_free(q);
            return TG_ERROR;
        }
        *a = (act_qparams){true, (float)scale, zp};
        return tg_module_replace_child(parent, name, q);
    }
    if (is_type(c, "DeQuantStub")) {
        if (!a->quantised) return TG_OK; /* a float region: stays identity */
        tg_module *d = tg_module_new(&dequantize_type, sizeof(cached_qparams));
        if (register_scalar(d, "input_scale", a->scale, TG_FLOAT32) ||
            register_scalar(d, "input_zero_point", (double)a->zero_point, TG_INT64)) {
            tg_module_free(d);
            return TG_ERROR;
        }
        a->quantised = false;
        return tg_module_replace_child(parent, name, d);
    }
    if (observed && strcmp(type_name(c), "QuantStub")) {
        if (!a->quantised)
            return tg_error("tg_quant_convert: %s \"%s\" runs on float input (no QuantStub before it)", type_name(c),
                            path);
        tg_module *q = make_qlayer(path, c, *a, qc);
        if (!q) return TG_ERROR;
        a->scale = buffer_value(q, "scale");
        a->zero_point = (int64_t)buffer_value(q, "zero_point");
        return tg_module_replace_child(parent, name, q);
    }
    if (is_type(c, "MaxPool2d")) {
        if (!a->quantised) return TG_OK;
        tg_pool_opts o;
        if (tg_nn_max_pool2d_get_opts(c, &o)) return TG_ERROR;
        tg_module *q = tg_module_new(&qmax_pool_type, sizeof o);
        *(tg_pool_opts *)tg_module_state(q) = o;
        return tg_module_replace_child(parent, name, q);
    }
    if (is_type(c, "Identity") || is_type(c, "Flatten") || tg_is_observer(c) || tg_is_fake_quantize(c)) return TG_OK;
    if (tg_module_num_children(c) > 0) return convert_children(c, path, a, qc);
    if (!a->quantised) return TG_OK;
    return tg_error("tg_quant_convert: %s \"%s\" has no int8 version (fuse a ReLU into the Conv2d / Linear before it, "
                    "or put a DeQuantStub before it)",
                    type_name(c), path);
}

static tg_status convert_children(tg_module *m, const char *prefix, act_qparams *a, tg_qconfig qc) {
    if (is_type(m, "QuantWrapper")) {
        static const char *const order[] = {"quant", "module", "dequant"};
        for (int i = 0; i < 3; i++)
            if (convert_child(m, order[i], prefix, a, qc)) return TG_ERROR;
        return TG_OK;
    }
    for (int i = 0; i < tg_module_num_children(m); i++) {
        const char *name;
        tg_module_child_at(m, i, &name);
        if (convert_child(m, name, prefix, a, qc)) return TG_ERROR;
    }
    return TG_OK;
}

static tg_status convert(tg_module *model, tg_qconfig qconfig, bool for_load) {
    if (!model) return tg_error("tg_quant_convert: model is NULL");
    act_qparams a = {0};
    bool prev = tg_set_grad_enabled(false);
    skeleton = for_load;
    tg_status st = convert_children(model, "", &a, qconfig);
    skeleton = false;
    tg_set_grad_enabled(prev);
    if (!st) tg_eval(model);
    return st;
}

tg_status tg_quant_convert(tg_module *model, tg_qconfig qconfig) { return convert(model, qconfig, false); }
tg_status tg_quant_convert_for_load(tg_module *model, tg_qconfig qconfig) { return convert(model, qconfig, true); }
