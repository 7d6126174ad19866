/* Dynamic quantisation of Linear (quant/quantize.h): the weight observer, the module,
 * the per-call input quantisation, and quantize_dynamic's walk over a model. */
#include "quant/quantize.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/scope.h"
#include "core/simd.h"
#include "nn/layers.h"
#include "onnx/graph.h"
#include "onnx/recording.h"
#include "ops/elementwise.h"
#include "ops/cpu/qgemm.h"
#include "ops/shape.h"

/* The buffer "weight" (uint8, q + 128) is the state that is saved and loaded; the
 * int8 copy the GEMM reads and its row sums are rebuilt from it whenever its version
 * moved (a load writes into it). */
typedef struct {
    int64_t in, out;
    bool per_channel;
    int8_t *weight;   /* out x in, row-major */
    int8_t *packed;   /* weight packed for the VNNI kernel that broadcasts a row (NULL without VNNI) */
    int32_t *col_sum; /* sum over k of each weight row (the input zero point's correction) */
    uint64_t version; /* of the "weight" buffer when weight and col_sum were made */
} qlinear_state;

static void sync_weight(tg_module *self) {
    qlinear_state *s = tg_module_state(self);
    tg_tensor *stored = tg_module_buffer(self, "weight");
    if (tg_version(stored) == s->version) return;
    TG_ASSERT(tg_is_contiguous(stored)); /* made so; loads and moves keep it so */
    const uint8_t *u = tg_data_ptr(stored);
    for (int64_t j = 0; j < s->out; j++) {
        int32_t sum = 0;
        for (int64_t p = 0; p < s->in; p++) {
            int8_t q = (int8_t)((int32_t)u[j * s->in + p] - 128);
            s->weight[j * s->in + p] = q;
            sum += q;
        }
        s->col_sum[j] = sum;
    }
    free(s->packed);
    s->packed = tg_qgemm_has_vnni() ? tg_qgemm_pack(s->out, s->in, s->weight) : NULL; /* NULL: the row kernel */
    s->version = tg_version(stored);
}

static const char *module_name(tg_module *m) {
    const tg_module_type *t = tg_module_type_of(m);
    return t && t->name ? t->name : "Module";
}

/* The per-call loops, vectorised (AVX2 / AVX-512 clones chosen at start: nearbyintf
 * becomes one rounding instruction instead of a libm call per element). */
TG_VECTOR_CLONES static bool range_with_zero(const float *x, int64_t count, float *min, float *max) {
    /* 16 running minima and maxima (min and max are exact in any order, and compare-
     * and-select lanes vectorise where one running value would be a serial chain).
     * bad sums x * 0, which is NaN exactly when some x is NaN or +-Inf: the finiteness
     * check rides in this pass instead of costing one of its own. */
    float lo[16] = {0}, hi[16] = {0}, bad[16] = {0}; /* the range always holds 0, as PyTorch's */
    int64_t i = 0;
    for (; i + 16 <= count; i += 16)
        for (int l = 0; l < 16; l++) {
            lo[l] = x[i + l] < lo[l] ? x[i + l] : lo[l];
            hi[l] = x[i + l] > hi[l] ? x[i + l] : hi[l];
            bad[l] += x[i + l] * 0.f;
        }
    for (; i < count; i++) {
        lo[0] = x[i] < lo[0] ? x[i] : lo[0];
        hi[0] = x[i] > hi[0] ? x[i] : hi[0];
        bad[0] += x[i] * 0.f;
    }
    for (int l = 1; l < 16; l++) {
        lo[0] = lo[l] < lo[0] ? lo[l] : lo[0];
        hi[0] = hi[l] > hi[0] ? hi[l] : hi[0];
        bad[0] += bad[l];
    }
    *min = lo[0];
    *max = hi[0];
    return bad[0] == 0.f;
}

/* The rare path of a batch holding NaN or Inf: the range of its finite values. */
static void finite_range_with_zero(const float *x, int64_t count, float *min, float *max) {
    float lo = 0.f, hi = 0.f;
    for (int64_t i = 0; i < count; i++)
        if (isfinite(x[i])) {
            lo = x[i] < lo ? x[i] : lo;
            hi = x[i] > hi ? x[i] : hi;
        }
    *min = lo;
    *max = hi;
}

TG_VECTOR_CLONES static void quantize_to_u8(const float *x, int64_t count, float inv_scale, int32_t zero_point,
                                            uint8_t *q) {
    for (int64_t i = 0; i < count; i++) {
        float v = nearbyintf(x[i] * inv_scale) + (float)zero_point;
        q[i] = (uint8_t)(v < 0.f ? 0.f : v > 255.f ? 255.f : v);
    }
}

/* The rare path's quantisation: NaN and Inf become the zero point (they add nothing to
 * the integer sums; fix_nonfinite_rows adds them in float afterwards). */
static void quantize_finite_to_u8(const float *x, int64_t count, float inv_scale, int32_t zero_point, uint8_t *q) {
    for (int64_t i = 0; i < count; i++) {
        float v = isfinite(x[i]) ? nearbyintf(x[i] * inv_scale) + (float)zero_point : (float)zero_point;
        q[i] = (uint8_t)(v < 0.f ? 0.f : v > 255.f ? 255.f : v);
    }
}

/* fbgemm's ReQuantizeForFloat: (acc - x_zp * row sum of the weights) * x_scale * w_scale + bias. */
TG_VECTOR_CLONES static void requantize_for_float(const int32_t *acc, int64_t rows, int64_t n, int32_t x_zp,
                                                  const int32_t *col_sum, float x_scale, const float *w_scale,
                                                  bool per_channel, const float *bias, float *out) {
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n; j++) {
            int32_t raw = acc[i * n + j] - x_zp * col_sum[j];
            float y = (float)raw * x_scale * w_scale[per_channel ? j : 0];
            out[i * n + j] = bias ? y + bias[j] : y;
        }
}

/* A row holding NaN or Inf: its finite values went through the int8 product (the others
 * as 0), and each non-finite x[p] now adds x[p] * w[j][p] (the dequantised weight) in
 * float, so the row gives NaN or +-Inf where the float Linear of those weights would
 * (Inf * a positive weight is +Inf, Inf * a zero weight NaN). Other rows are untouched. */
static void fix_nonfinite_rows(const qlinear_state *s, const float *x, int64_t rows, const float *w_scale, float *out) {
    int64_t k = s->in, n = s->out;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t p = 0; p < k; p++) {
            float v = x[i * k + p];
            if (isfinite(v)) continue;
            for (int64_t j = 0; j < n; j++)
                out[i * n + j] += v * ((float)s->weight[j * k + p] * w_scale[s->per_channel ? j : 0]);
        }
}

static void qlinear_free(tg_module *self) {
    qlinear_state *s = tg_module_state(self);
    free(s->weight);
    free(s->packed);
    free(s->col_sum);
}

static void qlinear_repr(tg_module *self, char *buf, size_t size) {
    qlinear_state *s = tg_module_state(self);
    snprintf(buf, size, "in_features=%lld, out_features=%lld, dtype=torch.qint8, qscheme=torch.%s", (long long)s->in,
             (long long)s->out, s->per_channel ? "per_channel_affine" : "per_tensor_affine");
}

/* PyTorch's quant_utils::ChooseQuantizationParams(min, max, 0, 255, false, false,
 * reduce_range=true): quint8 restricted to [0, 127]. */
static void choose_input_qparams(float min, float max, float *scale_out, int32_t *zero_point) {
    const int32_t qmin = 0, qmax = 127;
    const float small_scale = 6.1e-5f;
    min = min < 0.f ? min : 0.f;
    max = max > 0.f ? max : 0.f;
    double scale = ((double)max - min) / (qmax - qmin);
    if ((float)scale == 0.0f || isinf(1.0f / (float)scale)) scale = 0.1;
    if (scale < small_scale) {
        float org_scale = (float)scale;
        scale = small_scale;
        if (min == 0.0f) max = small_scale * (qmax - qmin);
        else if (max == 0.0f) min = -small_scale * (qmax - qmin);
        else {
            float amplifier = small_scale / org_scale;
            min *= amplifier;
            max *= amplifier;
        }
    }
    double zp_from_min = qmin - min / scale, zp_from_max = qmax - max / scale;
    double zp_from_min_error = fabs((double)qmin) - fabs(min / scale);
    double zp_from_max_error = fabs((double)qmax) - fabs(max / scale);
    double initial = zp_from_min_error < zp_from_max_error ? zp_from_min : zp_from_max;
    int32_t nudged = initial < qmin ? qmin : initial > qmax ? qmax : (int32_t)nearbyint(initial);
    *scale_out = (float)scale;
    *zero_point = nudged;
}

static tg_tensor *qlinear_compute(tg_module *self, tg_tensor *x) {
    qlinear_state *s = tg_module_state(self);
    tg_shape shape = tg_shape_of(x);
    if (tg_dtype_of(x) != TG_FLOAT32 || tg_device_of(x).kind != TG_DEVICE_CPU || shape.ndim < 1 ||
        shape.dims[shape.ndim - 1] != s->in) {
        char buf[64], dev[16];
        tg_shape_str(shape, buf, sizeof buf);
        tg_error("DynamicQuantizedLinear: expected a float32 CPU input of shape [..., %lld], got %s %s on %s",
                 (long long)s->in, tg_dtype_name(tg_dtype_of(x)), buf, tg_device_str(tg_device_of(x), dev));
        return NULL;
    }
    if (tg_device_of(tg_module_buffer(self, "weight")).kind != TG_DEVICE_CPU) {
        tg_error("DynamicQuantizedLinear: the quantised weights must stay on the CPU (an int8 CPU kernel)");
        return NULL;
    }
    int64_t rows = s->in ? tg_numel(x) / s->in : 0, k = s->in, n = s->out;
    sync_weight(self);
    const float *w_scale = tg_data_ptr(tg_module_buffer(self, "scale"));
    tg_tensor *xc = tg_contiguous(tg_detach(x));
    if (!xc) return NULL;
    const float *xv = tg_data_ptr(xc);
    float min = 0.f, max = 0.f;
    bool finite = range_with_zero(xv, rows * k, &min, &max);
    if (!finite) finite_range_with_zero(xv, rows * k, &min, &max);
    float x_scale;
    int32_t x_zp;
    choose_input_qparams(min, max, &x_scale, &x_zp);
    shape.dims[shape.ndim - 1] = n;
    tg_tensor *y = tg_empty(shape, (tg_opts){.dtype = TG_FLOAT32});
    if (!y) return NULL;
    uint8_t *xq = malloc((size_t)(rows * k > 0 ? rows * k : 1));
    if (!xq) return tg_error("DynamicQuantizedLinear: out of memory for a batch of %lld rows", (long long)rows), NULL;
    float *out = tg_data_ptr(y);
    if (finite) quantize_to_u8(xv, rows * k, 1.0f / x_scale, x_zp, xq);
    else quantize_finite_to_u8(xv, rows * k, 1.0f / x_scale, x_zp, xq);
    tg_tensor *bias = tg_module_buffer(self, "bias");
    const float *bv = bias ? tg_data_ptr(bias) : NULL;
    /* Exact int32 sums either way: a batch on the kernel that broadcasts each row against
     * 16 packed output channels (no horizontal sums) and scales the sums to float in its
     * registers, a single row on the one that splits its columns over the threads. */
    if (rows > 1 && s->packed && tg_qgemm_vnni_enabled()) {
        tg_qgemm_epilogue e = {.kind = TG_QGEMM_OUT_F32,
                               .out = out,
                               .ldc = n,
                               .x_zero_point = x_zp,
                               .x_scale = x_scale,
                               .col_sum = s->col_sum,
                               .w_scale = w_scale,
                               .bias = bv,
                               .per_channel = s->per_channel};
        tg_qgemm_u8s8_packed_epilogue(rows, n, k, xq, k, s->packed, &e);
    } else {
        int32_t *acc = malloc((size_t)(rows * n > 0 ? rows * n : 1) * sizeof *acc);
        if (!acc) {
            free(xq);
            return tg_error("DynamicQuantizedLinear: out of memory for a batch of %lld rows", (long long)rows), NULL;
        }
        tg_qgemm_u8s8s32(rows, n, k, xq, s->weight, acc);
        requantize_for_float(acc, rows, n, x_zp, s->col_sum, x_scale, w_scale, s->per_channel, bv, out);
        free(acc);
    }
    free(xq);
    if (!finite) fix_nonfinite_rows(s, xv, rows, w_scale, out);
    return y;
}

/* ---- ONNX export (onnx/recording.h): the layer as one op, written as QDQ ----
 *
 * The input's quantisation parameters are computed in the graph as here (the range
 * with 0, scale (max - min) / 127, at least 6.1e-5; zero point round(-min / scale)),
 * then QuantizeLinear / DequantizeLinear of the input, DequantizeLinear of the int8
 * weight (zero point 0, per tensor or per output row) and MatMul + Add. */
static tg_tensor *qlinear_op_forward(tg_ctx *ctx, tg_tensor *const *in) {
    return qlinear_compute(*(tg_module *const *)tg_ctx_attrs(ctx), in[0]);
}

/* out = op_type(a, b) into a fresh value (or `to`); NULL on error. */
static const char *node2(tg_onnx_op *op, const char *type, const char *a, const char *b, const char *to) {
    const char *out = to ? to : tg_onnx_value(op);
    return tg_onnx_add_node(op, type, b ? 2 : 1, (const char *[]){a, b}, 1, &out) ? out : NULL;
}

static tg_status qlinear_onnx(tg_onnx_op *op) {
    tg_module *self = *(tg_module *const *)tg_onnx_attrs(op);
    qlinear_state *s = tg_module_state(self);
    const char *x = tg_onnx_input_name(op, 0);
    /* the input's qparams, as choose_input_qparams */
    const char *zero = tg_onnx_const_scalar(op, TG_FLOAT32, 0), *qmax = tg_onnx_const_scalar(op, TG_FLOAT32, 127);
    const char *lo = tg_onnx_value(op), *hi = tg_onnx_value(op);
    tg_onnx_attr_int(tg_onnx_add_node(op, "ReduceMin", 1, &x, 1, &lo), "keepdims", 0);
    tg_onnx_attr_int(tg_onnx_add_node(op, "ReduceMax", 1, &x, 1, &hi), "keepdims", 0);
    lo = node2(op, "Min", lo, zero, NULL);
    hi = node2(op, "Max", hi, zero, NULL);
    const char *range = node2(op, "Sub", hi, lo, NULL);
    const char *scale =
        node2(op, "Max", node2(op, "Div", range, qmax, NULL), tg_onnx_const_scalar(op, TG_FLOAT32, 6.1e-5), NULL);
    const char *zp_f = node2(op, "Div", node2(op, "Mul", node2(op, "Neg", lo, NULL, NULL), qmax, NULL),
                             node2(op, "Max", range, tg_onnx_const_scalar(op, TG_FLOAT32, 1e-30), NULL), NULL);
    const char *zp_r = node2(op, "Round", zp_f, NULL, NULL), *zp = tg_onnx_value(op);
    tg_onnx_attr_int(tg_onnx_add_node(op, "Cast", 1, &zp_r, 1, &zp), "to", tg_onnx_dtype(TG_UINT8));
    const char *xq = tg_onnx_value(op), *xd = tg_onnx_value(op);
    if (!tg_onnx_add_node(op, "QuantizeLinear", 3, (const char *[]){x, scale, zp}, 1, &xq) ||
        !tg_onnx_add_node(op, "DequantizeLinear", 3, (const char *[]){xq, scale, zp}, 1, &xd))
        return TG_ERROR;
    /* the weight, transposed to [in, out] for MatMul */
    sync_weight(self);
    int8_t *wt = malloc((size_t)(s->in * s->out > 0 ? s->in * s->out : 1)), *zeros = calloc((size_t)s->out + 1, 1);
    TG_ASSERT(wt && zeros);
    for (int64_t j = 0; j < s->out; j++)
        for (int64_t p = 0; p < s->in; p++) wt[p * s->out + j] = s->weight[j * s->in + p];
    const char *w = tg_onnx_const_int8(op, TG_SHAPE(s->in, s->out), wt);
    const char *w_zp = tg_onnx_const_int8(op, s->per_channel ? TG_SHAPE(s->out) : TG_SCALAR_SHAPE, zeros);
    free(wt);
    free(zeros);
    tg_op_observer paused = tg_onnx_pause();
    const char *w_scale = NULL, *b = NULL;
    tg_tensor *bias = tg_module_buffer(self, "bias");
    TG_SCOPE {
        tg_tensor *sc = tg_module_buffer(self, "scale");
        w_scale = tg_onnx_const_tensor(op, s->per_channel ? sc : tg_reshape(sc, TG_SCALAR_SHAPE));
        if (bias) b = tg_onnx_const_tensor(op, bias);
    }
    tg_onnx_resume(paused);
    if (!w_scale || (bias && !b)) return TG_ERROR;
    const char *wd = tg_onnx_value(op);
    tg_onnx_node *dq = tg_onnx_add_node(op, "DequantizeLinear", 3, (const char *[]){w, w_scale, w_zp}, 1, &wd);
    if (!dq) return TG_ERROR;
    if (s->per_channel) tg_onnx_attr_int(dq, "axis", 1);
    const char *y = tg_onnx_output_name(op, 0);
    if (!bias) return node2(op, "MatMul", xd, wd, y) ? TG_OK : TG_ERROR;
    return node2(op, "Add", node2(op, "MatMul", xd, wd, NULL), b, y) ? TG_OK : TG_ERROR;
}

static const tg_function qlinear_op = {.name = "dynamic_quantized_linear",
                                       .num_inputs = 1,
                                       .forward = qlinear_op_forward,
                                       .low_precision = TG_LOW_PRECISION_NATIVE,
                                       .onnx = qlinear_onnx};

static tg_tensor *qlinear_forward(tg_module *self, tg_tensor *x) {
    if (tg_onnx_recording()) return tg_apply_args(&qlinear_op, &x, &self, sizeof self);
    return qlinear_compute(self, x);
}

static const tg_module_type qlinear_type = {
    .name = "DynamicQuantizedLinear", .forward = qlinear_forward, .free = qlinear_free, .extra_repr = qlinear_repr};

static bool is_linear(tg_module *m) {
    const tg_module_type *t = tg_module_type_of(m);
    return t && t->name && !strcmp(t->name, "Linear");
}

/* The first NaN or Inf of w[0..count), or -1. */
static int64_t first_nonfinite(const float *w, int64_t count) {
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(w[i])) return i;
    return -1;
}

/* An error for a Linear's weight holding NaN or Inf (PyTorch's observer fails too, with
 * "min nan should be less than max nan"); TG_OK when it holds none. */
static tg_status check_finite_weight(const char *op, const char *who, tg_tensor *w) {
    tg_status st = TG_OK;
    TG_SCOPE {
        tg_tensor *wc = tg_contiguous(tg_detach(w));
        int64_t at = wc ? first_nonfinite(tg_data_ptr(wc), tg_numel(wc)) : -1, in = tg_shape_of(w).dims[1];
        if (!wc) st = TG_ERROR;
        else if (at >= 0)
            st = tg_error("%s: %s holds %g at [%lld, %lld]: a weight with NaN or Inf cannot be quantised, "
                          "module unchanged",
                          op, who, (double)((const float *)tg_data_ptr(wc))[at], (long long)(at / in),
                          (long long)(at % in));
    }
    return st;
}

/* MinMaxObserver(qint8, per_tensor_symmetric) over w[0..count): the scale, in float32. */
static float symmetric_scale(const float *w, int64_t count) {
    float min = 0.f, max = 0.f;
    for (int64_t i = 0; i < count; i++) {
        min = w[i] < min ? w[i] : min;
        max = w[i] > max ? w[i] : max;
    }
    float amax = -min > max ? -min : max;
    float scale = amax / 127.5f; /* (quant_max - quant_min) / 2 */
    const float eps = 1.1920928955078125e-07f;
    return scale > eps ? scale : eps;
}

tg_module *tg_nn_dynamic_quantized_linear(tg_module *linear, tg_quantize_opts opts) {
    const char *op = "tg_nn_dynamic_quantized_linear";
    if (!linear) {
        tg_error("%s: module is NULL", op);
        return NULL;
    }
    tg_tensor *w = tg_module_param(linear, "weight"); /* a pruned Linear's masked weight too */
    if (!is_linear(linear) || !w || tg_ndim(w) != 2) {
        tg_error("%s: expected a Linear, got %s", op, module_name(linear));
        return NULL;
    }
    tg_tensor *bias = tg_module_param(linear, "bias");
    if (tg_dtype_of(w) != TG_FLOAT32 || tg_device_of(w).kind != TG_DEVICE_CPU ||
        (bias && (tg_dtype_of(bias) != TG_FLOAT32 || tg_device_of(bias).kind != TG_DEVICE_CPU))) {
        char dev[16];
        tg_error("%s: Linear's weight and bias must be float32 on the CPU, got a weight of %s on %s", op,
                 tg_dtype_name(tg_dtype_of(w)), tg_device_str(tg_device_of(w), dev));
        return NULL;
    }
    int64_t out = tg_shape_of(w).dims[0], in = tg_shape_of(w).dims[1];
    char who[96];
    snprintf(who, sizeof who, "Linear(in_features=%lld, out_features=%lld).weight", (long long)in, (long long)out);
    if (check_finite_weight(op, who, w)) return NULL;
    tg_module *q = tg_module_new(&qlinear_type, sizeof(qlinear_state));
    qlinear_state *s = tg_module_state(q);
    s->in = in;
    s->out = out;
    s->per_channel = opts.per_channel;
    s->weight = malloc((size_t)(out * in > 0 ? out * in : 1));
    s->col_sum = calloc((size_t)(out > 0 ? out : 1), sizeof *s->col_sum);
    int64_t nscale = opts.per_channel ? out : 1;
    float *scales = malloc((size_t)(nscale > 0 ? nscale : 1) * sizeof *scales);
    uint8_t *stored = malloc((size_t)(out * in > 0 ? out * in : 1));
    TG_ASSERT(s->weight && s->col_sum && scales && stored);
    tg_status status = TG_ERROR;
    bool prev = tg_set_grad_enabled(false);
    tg_scope_begin();
    tg_tensor *wc = tg_contiguous(tg_detach(w));
    if (wc) {
        const float *wv = tg_data_ptr(wc);
        if (!opts.per_channel) scales[0] = symmetric_scale(wv, out * in);
        for (int64_t j = 0; j < out; j++) {
            if (opts.per_channel) scales[j] = symmetric_scale(wv + j * in, in);
            const float inv = 1.0f / scales[opts.per_channel ? j : 0];
            for (int64_t p = 0; p < in; p++) {
                float v = nearbyintf(wv[j * in + p] * inv);
                stored[j * in + p] = (uint8_t)((v < -128.f ? -128.f : v > 127.f ? 127.f : v) + 128.f);
            }
        }
        tg_tensor *weight = tg_from_data(stored, TG_SHAPE(out, in), (tg_opts){.dtype = TG_UINT8});
        tg_tensor *scale = tg_from_data(scales, TG_SHAPE(nscale), (tg_opts){.dtype = TG_FLOAT32});
        tg_tensor *zp = tg_zeros(TG_SHAPE(nscale), (tg_opts){.dtype = TG_INT64});
        status = weight && scale && zp ? TG_OK : TG_ERROR;
        if (!status) status = tg_register_buffer(q, "weight", weight);
        if (!status) status = tg_register_buffer(q, "scale", scale);
        if (!status) status = tg_register_buffer(q, "zero_point", zp);
        if (!status && bias) status = tg_register_buffer(q, "bias", tg_clone(bias));
    }
    if (!status) {
        s->version = tg_version(tg_module_buffer(q, "weight")) + 1; /* never equal: sync builds */
        sync_weight(q);
    }
    tg_scope_end();
    tg_set_grad_enabled(prev);
    free(scales);
    free(stored);
    if (status) {
        tg_module_free(q);
        return NULL;
    }
    return q;
}

tg_tensor *tg_quantized_linear_weight(tg_module *qlinear) {
    if (!qlinear || tg_module_type_of(qlinear) != &qlinear_type) {
        tg_error("tg_quantized_linear_weight: expected a DynamicQuantizedLinear, got %s",
                 qlinear ? module_name(qlinear) : "NULL");
        return NULL;
    }
    qlinear_state *s = tg_module_state(qlinear);
    sync_weight(qlinear);
    int32_t *v = malloc((size_t)(s->out * s->in > 0 ? s->out * s->in : 1) * sizeof *v);
    TG_ASSERT(v != NULL);
    for (int64_t i = 0; i < s->out * s->in; i++) v[i] = s->weight[i];
    tg_tensor *t = tg_from_data(v, TG_SHAPE(s->out, s->in), (tg_opts){.dtype = TG_INT32});
    free(v);
    return t;
}

/* An error when a Linear below m cannot be quantised (checked first, so that a failure
 * leaves the model untouched); prefix is m's dotted path ("" or "encoder."). */
static tg_status bad_linear_below(tg_module *m, const char *prefix) {
    for (int i = 0; i < tg_module_num_children(m); i++) {
        const char *name = NULL;
        tg_module *c = tg_module_child_at(m, i, &name);
        char path[256];
        snprintf(path, sizeof path, "%s%s.", prefix, name);
        if (is_linear(c)) {
            tg_tensor *w = tg_module_param(c, "weight");
            tg_tensor *b = tg_module_param(c, "bias");
            if (!w || tg_dtype_of(w) != TG_FLOAT32 || tg_device_of(w).kind != TG_DEVICE_CPU ||
                (b && (tg_dtype_of(b) != TG_FLOAT32 || tg_device_of(b).kind != TG_DEVICE_CPU)))
                return tg_error("tg_quantize_dynamic: every Linear must have a float32 CPU weight (move the model "
                                "with tg_module_to / tg_module_cast first)");
            char who[280];
            snprintf(who, sizeof who, "\"%sweight\"", path);
            if (check_finite_weight("tg_quantize_dynamic", who, w)) return TG_ERROR;
        } else if (bad_linear_below(c, path)) {
            return TG_ERROR;
        }
    }
    return TG_OK;
}

static tg_status replace_linears(tg_module *m, tg_quantize_opts opts) {
    for (int i = 0; i < tg_module_num_children(m); i++) {
        const char *name = NULL;
        tg_module *c = tg_module_child_at(m, i, &name);
        if (is_linear(c)) {
            if (tg_module_replace_child(m, name, tg_nn_dynamic_quantized_linear(c, opts))) return TG_ERROR;
        } else if (replace_linears(c, opts)) {
            return TG_ERROR;
        }
    }
    return TG_OK;
}

tg_module *tg_quantize_dynamic(tg_module *model, tg_quantize_opts opts) {
    if (!model) {
        tg_error("tg_quantize_dynamic: model is NULL");
        return NULL;
    }
    if (is_linear(model)) {
        tg_module *q = tg_nn_dynamic_quantized_linear(model, opts);
        if (q) tg_module_free(model);
        return q;
    }
    if (bad_linear_below(model, "")) return NULL;
    return replace_linears(model, opts) ? NULL : model;
}

bool tg_quantize_uses_vnni(void) { return tg_qgemm_has_vnni(); }

bool tg_quantize_uses_amx(void) { return tg_qgemm_amx_enabled(); }
