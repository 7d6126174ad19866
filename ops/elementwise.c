/* Elementwise ops: definitions (checks, result shape and dtype, backward formulas)
 * and CPU kernels. CUDA kernels: ops/cuda/elementwise.cu. */
#include "ops/elementwise_impl.h"
#include "ops/inplace.h"

#include <math.h>
#include <string.h>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/convert.h"
#include "core/iter.h"
#include "core/lowp.h"
#include "core/scope.h"
#include "core/simd.h"
#include "core/tensor_impl.h"
#include "core/typed_libm.h" /* TG_EXP and the rest, for the formula rows */
#include "ops/cuda/elementwise.h"
#include "onnx/graph.h"
#include "ops/dispatch.h"
#include "ops/reduce.h"
#include "ops/cpu/relu_bf16.h"
#include "ops/shape.h"
#include "ops/binary_formulas.h"
#include "ops/unary_formulas.h"

/* ======================= CPU kernels ======================= */

#define UNARY_CPU_CASE(KIND, expr) \
    case TG_UNARY_##KIND: UNARY_LOOP(scalar_t, expr); break;
/* A float row's formula column (ops/unary_formulas.h). */
#define UNARY_CPU_FLOAT_CASE(KIND, name, api, saves, autocast, expr, grad) UNARY_CPU_CASE(KIND, expr)

#define UNARY_LOOP(T, expr)                           \
    do {                                              \
        if (s[0] == sizeof(T) && s[1] == sizeof(T)) { \
            T *restrict o = (T *)p[0];                \
            const T *restrict in = (const T *)p[1];   \
            for (int64_t i = 0; i < n; i++) {         \
                T x = in[i];                          \
                o[i] = (expr);                        \
            }                                         \
        } else {                                      \
            for (int64_t i = 0; i < n; i++) {         \
                T x = *(const T *)(p[1] + i * s[1]);  \
                *(T *)(p[0] + i * s[0]) = (expr);     \
            }                                         \
        }                                             \
    } while (0)

typedef struct {
    tg_unary_kind kind;
    double a, b;
} unary_ctx;

TG_VECTOR_CLONES static void unary_row_f32(char **p, const int64_t *s, int64_t n, void *vctx) {
    typedef float scalar_t;
    const unary_ctx *c = vctx;
    const scalar_t a = (scalar_t)c->a, b = (scalar_t)c->b;
    switch (c->kind) {
        TG_UNARY_FLOAT_FORMULAS(UNARY_CPU_FLOAT_CASE)
    default: break;
    }
}

TG_VECTOR_CLONES static void unary_row_f64(char **p, const int64_t *s, int64_t n, void *vctx) {
    typedef double scalar_t;
    const unary_ctx *c = vctx;
    const scalar_t a = c->a, b = c->b;
    switch (c->kind) {
        TG_UNARY_FLOAT_FORMULAS(UNARY_CPU_FLOAT_CASE)
    default: break;
    }
}

/* Integers: the kinds that have a row in TG_UNARY_INT_FORMULAS. */
#define INT_UNARY_ROW(NAME, T)                                                   \
    static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) {        \
        typedef T scalar_t;                                                      \
        const unary_ctx *c = vctx;                                               \
        const scalar_t a = (scalar_t)(int64_t)c->a, b = (scalar_t)(int64_t)c->b; \
        const double pa = c->a, pb = c->b;                                       \
        switch (c->kind) {                                                       \
            TG_UNARY_INT_FORMULAS(UNARY_CPU_CASE)                                \
        default: break;                                                          \
        }                                                                        \
    }
INT_UNARY_ROW(unary_row_i64, int64_t)
INT_UNARY_ROW(unary_row_i32, int32_t)

/* out[i] = expr for i < n, with x and y of type T read as X and Y and the output as O
 * (expressions of i). */
#define BINARY_FOR(T, O, X, Y, expr)  \
    for (int64_t i = 0; i < n; i++) { \
        T x = (X), y = (Y);           \
        O = (expr);                   \
    }
#define BINARY_AT(T, k) (*(T *)(p[k] + i * s[k]))
/* Fast paths: all contiguous, or b (or a) a broadcast scalar; then the general one. */
#define BINARY_LOOP(T, OUT, expr)                                                                \
    do {                                                                                         \
        const int64_t es = sizeof(T), os = sizeof(OUT);                                          \
        if (s[0] == os && s[1] == es && s[2] == es) {                                            \
            OUT *restrict o = (OUT *)p[0];                                                       \
            const T *restrict pa = (const T *)p[1], *restrict pb = (const T *)p[2];              \
            BINARY_FOR(T, o[i], pa[i], pb[i], expr)                                              \
        } else if (s[0] == os && s[1] == es && s[2] == 0) {                                      \
            OUT *restrict o = (OUT *)p[0];                                                       \
            const T *restrict pa = (const T *)p[1];                                              \
            const T y0 = *(const T *)p[2];                                                       \
            BINARY_FOR(T, o[i], pa[i], y0, expr)                                                 \
        } else if (s[0] == os && s[1] == 0 && s[2] == es) {                                      \
            OUT *restrict o = (OUT *)p[0];                                                       \
            const T *restrict pb = (const T *)p[2];                                              \
            const T x0 = *(const T *)p[1];                                                       \
            BINARY_FOR(T, o[i], x0, pb[i], expr)                                                 \
        } else {                                                                                 \
            BINARY_FOR(T, BINARY_AT(OUT, 0), BINARY_AT(const T, 1), BINARY_AT(const T, 2), expr) \
        }                                                                                        \
    } while (0)

/* The rows of ops/binary_formulas.h; pow per type (TG_POW or TG_BINARY_INT_POW); EXTRA: the float or int table. */
#define BINARY_CPU_CASE(KIND, expr)            \
    case TG_BINARY_##KIND:                     \
        BINARY_LOOP(scalar_t, scalar_t, expr); \
        break;
#define BINARY_CPU_ARITH_CASE(KIND, name, expr, saves, grad_a, grad_b) BINARY_CPU_CASE(KIND, expr)
#define COMPARE_CPU_CASE(KIND, name, expr) \
    case TG_BINARY_##KIND:                 \
        BINARY_LOOP(scalar_t, bool, expr); \
        break;
#define NO_ROWS(X)
#define BINARY_ROW(NAME, T, POW, EXTRA, EXTRA_CASE)                                        \
    TG_VECTOR_CLONES static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) { \
        typedef T scalar_t;                                                                \
        switch (*(const tg_binary_kind *)vctx) {                                           \
            TG_BINARY_FORMULAS(BINARY_CPU_ARITH_CASE)                                      \
            TG_BINARY_COMPARE_FORMULAS(COMPARE_CPU_CASE)                                   \
            EXTRA(EXTRA_CASE)                                                              \
        case TG_BINARY_POW: BINARY_LOOP(T, T, POW(x, y)); break;                           \
        default: break;                                                                    \
        }                                                                                  \
    }
BINARY_ROW(binary_row_f32, float, TG_POW, TG_BINARY_FLOAT_FORMULAS, BINARY_CPU_ARITH_CASE)
BINARY_ROW(binary_row_f64, double, TG_POW, TG_BINARY_FLOAT_FORMULAS, BINARY_CPU_ARITH_CASE)
BINARY_ROW(binary_row_i64, int64_t, TG_BINARY_INT_POW, TG_BINARY_INT_FORMULAS, BINARY_CPU_CASE)
BINARY_ROW(binary_row_i32, int32_t, TG_BINARY_INT_POW, TG_BINARY_INT_FORMULAS, BINARY_CPU_CASE)
BINARY_ROW(binary_row_u8, uint8_t, TG_BINARY_INT_POW, NO_ROWS, BINARY_CPU_CASE)
/* bool arithmetic follows C's (true * true == true); only comparisons matter in practice. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wint-in-bool-context"
BINARY_ROW(binary_row_bool, bool, TG_BINARY_INT_POW, NO_ROWS, BINARY_CPU_CASE)
#pragma GCC diagnostic pop

static tg_iter_row_fn binary_row_for(tg_dtype d) {
    switch (d) {
    case TG_FLOAT32: return binary_row_f32;
    case TG_FLOAT64: return binary_row_f64;
    case TG_INT64: return binary_row_i64;
    case TG_INT32: return binary_row_i32;
    case TG_UINT8: return binary_row_u8;
    case TG_BOOL: return binary_row_bool;
    default: return NULL;
    }
}

/* ======================= kernel entries ======================= */

/* float16 / bfloat16 operands: computed in float32 and rounded once into out, as
 * PyTorch's CPU kernels do (each element is widened exactly, so comparisons are
 * exact and arithmetic differs from a float32 tensor's only by the final rounding).
 * Runs on either device (the casts are tg_copy_values_). */
static tg_tensor *widened(tg_tensor *t) {
    if (!tg_dtype_is_low_precision(t->dtype)) return t;
    tg_tensor *w = tg_empty(t->shape, (tg_opts){.dtype = TG_FLOAT32, .device = t->storage->device});
    return w && !tg_copy_values_(w, t) ? w : NULL;
}

/* On the CPU, operands of a low-precision dtype or float32 (and a bool output for a
 * comparison): the float32 row runs on blocks of LOWP_BLOCK elements widened into stack
 * buffers, its low-precision output rounded from one, so no float32 copy of a whole
 * tensor is made and each element is read and written once. The same float32 formulas
 * and the same rounding as the widened copies below, so the same bits. */
enum { LOWP_BLOCK = 256 };

typedef struct {
    tg_iter_row_fn row; /* unary_row_f32 / binary_row_f32 */
    void *ctx;          /* its context */
    int operands;       /* out, x[, y] */
    tg_dtype dtype[3];
} lowp_rows;

TG_VECTOR_CLONES static void widen_block(tg_dtype d, const char *src, int64_t stride, int64_t n, float *dst) {
    if (d == TG_BFLOAT16 && stride == 2)
        for (int64_t i = 0; i < n; i++) dst[i] = tg_bf16_bits_to_float(((const uint16_t *)src)[i]);
    else if (d == TG_BFLOAT16)
        for (int64_t i = 0; i < n; i++) dst[i] = tg_bf16_bits_to_float(*(const uint16_t *)(src + i * stride));
    else
        for (int64_t i = 0; i < n; i++) dst[i] = tg_half_bits_to_float(*(const uint16_t *)(src + i * stride));
}

TG_VECTOR_CLONES static void round_block(tg_dtype d, const float *src, int64_t n, char *dst, int64_t stride) {
    if (d == TG_BFLOAT16 && stride == 2)
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = tg_float_to_bf16_bits(src[i]);
    else if (d == TG_BFLOAT16)
        for (int64_t i = 0; i < n; i++) *(uint16_t *)(dst + i * stride) = tg_float_to_bf16_bits(src[i]);
    else
        for (int64_t i = 0; i < n; i++) *(uint16_t *)(dst + i * stride) = tg_float_to_half_bits(src[i]);
}

static void lowp_row(char **p, const int64_t *s, int64_t n, void *vctx) {
    const lowp_rows *c = vctx;
    float buf[3][LOWP_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += LOWP_BLOCK) {
        int64_t m = n - i0 < LOWP_BLOCK ? n - i0 : LOWP_BLOCK;
        char *q[3];
        int64_t qs[3];
        for (int k = 0; k < c->operands; k++) {
            char *at = p[k] + i0 * s[k];
            if (!tg_dtype_is_low_precision_inline(c->dtype[k])) {
                q[k] = at, qs[k] = s[k];
            } else if (k > 0 && s[k] == 0) { /* a broadcast scalar stays one */
                widen_block(c->dtype[k], at, 0, 1, buf[k]);
                q[k] = (char *)buf[k], qs[k] = 0;
            } else {
                if (k > 0) widen_block(c->dtype[k], at, s[k], m, buf[k]);
                q[k] = (char *)buf[k], qs[k] = (int64_t)sizeof(float);
            }
        }
        c->row(q, qs, m, c->ctx);
        if (tg_dtype_is_low_precision_inline(c->dtype[0])) round_block(c->dtype[0], buf[0], m, p[0] + i0 * s[0], s[0]);
    }
}

static bool lowp_rows_fit(const tg_tensor *t, bool bool_ok) {
    return tg_dtype_is_low_precision_inline(t->dtype) || t->dtype == TG_FLOAT32 || (bool_ok && t->dtype == TG_BOOL);
}

static tg_status low_precision_rows(tg_tensor *out, tg_tensor *x, tg_tensor *y, tg_iter_row_fn row, void *ctx) {
    int operands = y ? 3 : 2;
    lowp_rows c = {row, ctx, operands, {out->dtype, x->dtype, y ? y->dtype : TG_FLOAT32}};
    tg_iter it;
    tg_tensor *ops[3] = {out, x, y};
    tg_iter_init(&it, &out->shape, operands, ops);
    tg_iter_run(&it, lowp_row, &c, true);
    return TG_OK;
}

static tg_status low_precision_into(const char *op, int kind, bool binary, tg_tensor *out, tg_tensor *x, tg_tensor *y,
                                    double a, double b) {
    /* relu and its backward select bits: no widening (ops/cpu/relu_bf16.c, the same bits) */
    if (binary ? kind == TG_BINARY_RELU_BACKWARD && tg_relu_backward_bf16_select(out, x, y)
               : kind == TG_UNARY_RELU && tg_relu_bf16_select(out, x))
        return TG_OK;
    if (out->storage->device.kind == TG_DEVICE_CPU && lowp_rows_fit(x, false) && (!binary || lowp_rows_fit(y, false)) &&
        lowp_rows_fit(out, binary && TG_BINARY_IS_COMPARISON(kind)) &&
        (out->dtype != TG_BOOL || TG_BINARY_IS_COMPARISON(kind))) {
        if (binary) {
            tg_binary_kind k = (tg_binary_kind)kind;
            return low_precision_rows(out, x, y, binary_row_f32, &k);
        }
        unary_ctx c = {(tg_unary_kind)kind, a, b};
        return low_precision_rows(out, x, NULL, unary_row_f32, &c);
    }
    tg_status status = TG_ERROR;
    TG_SCOPE {
        tg_tensor *wx = widened(x), *wy = binary ? widened(y) : NULL, *wo = widened(out);
        if (wx && wo && (!binary || wy) &&
            !(binary ? tg_binary_into(op, (tg_binary_kind)kind, wo, wx, wy)
                     : tg_unary_into(op, (tg_unary_kind)kind, wo, wx, a, b)))
            status = wo == out ? TG_OK : tg_copy_values_(out, wo);
    }
    return status;
}

/* float16 / bfloat16 on CUDA with operands of one dtype (and a bool output for comparisons):
 * the CUDA kernels widen each element in registers (ops/cuda/elementwise.cu), with no float32
 * copies; mixed dtypes and the CPU go through low_precision_into. */
static bool cuda_low_precision_native(tg_tensor *out, tg_tensor *a, tg_tensor *b, bool compare) {
    return tg_on_cuda(out) && tg_dtype_is_low_precision(a->dtype) && (!b || b->dtype == a->dtype) &&
           out->dtype == (compare ? TG_BOOL : a->dtype);
}

tg_status tg_unary_into(const char *op, tg_unary_kind kind, tg_tensor *out, tg_tensor *x, double a, double b) {
    if (tg_dtype_is_low_precision(x->dtype) || tg_dtype_is_low_precision(out->dtype)) {
        if (cuda_low_precision_native(out, x, NULL, false)) return TG_CUDA_CALL(op, tg_cuda_unary, kind, out, x, a, b);
        return low_precision_into(op, kind, false, out, x, NULL, a, b);
    }
    if (tg_on_cuda(out)) return TG_CUDA_CALL(op, tg_cuda_unary, kind, out, x, a, b);
    tg_iter_row_fn row = NULL;
    switch (x->dtype) {
    case TG_FLOAT32: row = unary_row_f32; break;
    case TG_FLOAT64: row = unary_row_f64; break;
    case TG_INT64: row = tg_unary_int_kind_ok(kind) ? unary_row_i64 : NULL; break;
    case TG_INT32: row = tg_unary_int_kind_ok(kind) ? unary_row_i32 : NULL; break;
    default: break;
    }
    if (!row) return tg_error("%s: not implemented for dtype %s", op, tg_dtype_name(x->dtype));
    tg_iter it;
    tg_tensor *ops[2] = {out, x};
    tg_iter_init(&it, &out->shape, 2, ops);
    unary_ctx c = {kind, a, b};
    tg_iter_run(&it, row, &c, true);
    return TG_OK;
}

tg_status tg_binary_into(const char *op, tg_binary_kind kind, tg_tensor *out, tg_tensor *a, tg_tensor *b) {
    if (tg_dtype_is_low_precision_inline(a->dtype) || tg_dtype_is_low_precision_inline(b->dtype) ||
        tg_dtype_is_low_precision_inline(out->dtype)) {
        if (cuda_low_precision_native(out, a, b, TG_BINARY_IS_COMPARISON(kind)))
            return TG_CUDA_CALL(op, tg_cuda_binary, kind, out, a, b);
        return low_precision_into(op, kind, true, out, a, b, 0, 0);
    }
    if (tg_on_cuda(out)) return TG_CUDA_CALL(op, tg_cuda_binary, kind, out, a, b);
    tg_iter_row_fn row = binary_row_for(a->dtype);
    if (!row) return tg_error("%s: not implemented for dtype %s", op, tg_dtype_name(a->dtype));
    tg_iter it;
    tg_tensor *ops[3] = {out, a, b};
    tg_iter_init(&it, &out->shape, 3, ops);
    tg_iter_run(&it, row, &kind, true);
    return TG_OK;
}

/* ======================= unary ops ======================= */

typedef struct {
    tg_function fn;     /* first, so tg_ctx_function gives back the whole struct */
    tg_unary_kind kind; /* integers: the kinds tg_unary_int_kind_ok names */
} unary_op;

typedef struct {
    double a, b;
} scalar_args;

static tg_status unary_onnx(tg_onnx_op *op) {
    const scalar_args *s = tg_onnx_attrs(op);
    return tg_unary_to_onnx(op, ((const unary_op *)tg_onnx_function(op))->kind, s ? s->a : 0, s ? s->b : 0);
}

static tg_tensor *unary_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const unary_op *op = (const unary_op *)tg_ctx_function(ctx);
    const scalar_args *args = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    if (!tg_dtype_is_floating(x->dtype) && !tg_unary_int_kind_ok(op->kind))
        return tg_error("%s: expected a floating-point tensor, got %s", op->fn.name, tg_dtype_name(x->dtype)), NULL;
    tg_tensor *out = tg_empty_like(x);
    if (!out || tg_unary_into(op->fn.name, op->kind, out, x, args->a, args->b)) return NULL;
    tg_tensor *y = out;
    switch (op->kind) { /* a row's saves column: x, or y where its gradient is cheapest from the output */
#define UNARY_SAVE_CASE(KIND, name, api, saves, autocast, expr, grad) \
    case TG_UNARY_##KIND: tg_ctx_save(ctx, saves); break;
        TG_UNARY_FLOAT_FORMULAS(UNARY_SAVE_CASE)
#undef UNARY_SAVE_CASE
    default: break; /* TG_UNARY_COUNT */
    }
    return out;
}

/* A 0/1 mask of x's dtype from a comparison kind (TG_UNARY_GT_SCALAR, ...); not recorded. */
static tg_tensor *mask_of(const char *op, tg_unary_kind kind, tg_tensor *x, double a) {
    tg_tensor *out = tg_empty_like(x);
    if (!out || tg_unary_into(op, kind, out, x, a, 0)) return NULL;
    return out;
}

/* The derivatives that take more than one expression, named by their rows' gradient
 * column (ops/unary_formulas.h); v is x, a and b the kind's parameters. */
/* GELU's second derivatives, for the gradients of the one-pass backward rows (ops/binary_formulas.h):
 * exact, phi(x) (2 - x^2); tanh approximation, (1 - t^2) (u' - x t u'^2 + 3 k c x^2) with
 * u = k (x + c x^3), u' = k (1 + 3 c x^2), t = tanh(u). */
static tg_tensor *gelu_second_derivative(tg_tensor *v) {
    tg_tensor *x2 = tg_mul(v, v);
    tg_tensor *pdf = tg_mul_scalar(tg_exp(tg_mul_scalar(x2, -0.5)), TG_INV_SQRT_2PI);
    return tg_mul(pdf, tg_rsub_scalar(x2, 2));
}

static tg_tensor *gelu_tanh_second_derivative(tg_tensor *v) {
    const double k = TG_SQRT2_PI, c = 0.044715;
    tg_tensor *x2 = tg_mul(v, v);
    tg_tensor *t = tg_tanh(tg_mul_scalar(tg_add(v, tg_mul_scalar(tg_mul(x2, v), c)), k));
    tg_tensor *du = tg_mul_scalar(tg_add_scalar(tg_mul_scalar(x2, 3 * c), 1), k);
    tg_tensor *inner = tg_sub(tg_add(du, tg_mul_scalar(x2, 3 * k * c)), tg_mul(tg_mul(v, t), tg_mul(du, du)));
    return tg_mul(tg_rsub_scalar(tg_mul(t, t), 1), inner);
}

static tg_tensor *silu_derivative(tg_tensor *v) {
    tg_tensor *s = tg_sigmoid(v);
    return tg_mul(s, tg_add_scalar(tg_mul(v, tg_rsub_scalar(s, 1)), 1));
}

static tg_tensor *softplus_derivative(tg_tensor *v, double beta, double threshold) {
    /* sigmoid(beta x) below the threshold, 1 above */
    tg_tensor *bx = tg_mul_scalar(v, beta);
    tg_tensor *above = tg_gt_mask(bx, threshold);
    return tg_add(above, tg_mul(tg_rsub_scalar(above, 1), tg_sigmoid(bx)));
}

static tg_tensor *clamp_derivative(tg_tensor *v, double min, double max) { /* 1 where min <= x <= max */
    tg_tensor *below = isnan(min) ? tg_zeros_like(v) : tg_gt_mask(tg_rsub_scalar(v, min), 0);
    tg_tensor *over = isnan(max) ? tg_zeros_like(v) : tg_gt_mask(v, max);
    tg_tensor *d = tg_mul(tg_rsub_scalar(below, 1), tg_rsub_scalar(over, 1)); /* 0 everywhere when min > max */
    return tg_mul(d, tg_cast(tg_eq(v, v), v->dtype));                         /* and at NaN, as PyTorch */
}

static tg_tensor *elu_derivative(tg_tensor *v, double alpha, double scale) {
    /* alpha scale e^x at or below 0, scale above (PyTorch's elu_backward) */
    tg_tensor *above = tg_gt_mask(v, 0);
    return tg_add(tg_mul_scalar(above, scale),
                  tg_mul(tg_rsub_scalar(above, 1), tg_mul_scalar(tg_exp(v), alpha * scale)));
}

static tg_tensor *mish_derivative(tg_tensor *v) { /* t + x sigmoid(x) (1 - t^2), t = tanh(log1p(e^x)) */
    tg_tensor *t = tg_tanh(tg_log1p(tg_exp(v)));
    return tg_add(t, tg_mul(tg_mul(v, tg_sigmoid(v)), tg_rsub_scalar(tg_mul(t, t), 1)));
}

static tg_tensor *hardswish_derivative(tg_tensor *v) {
    /* 0 below -3, x/3 + 1/2 from -3 to below 3, 1 from 3 (PyTorch 1.13) */
    tg_tensor *below = tg_gt_mask(tg_neg(v), 3), *above = tg_rsub_scalar(tg_gt_mask(tg_neg(v), -3), 1);
    tg_tensor *inside = tg_mul(tg_rsub_scalar(above, 1), tg_add_scalar(tg_div_scalar(v, 3), 0.5));
    return tg_mul(tg_rsub_scalar(below, 1), tg_add(inside, above));
}

/* A row's gradient column, in g (the output's gradient), v (the saved x or y), a, b. */
static void unary_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const unary_op *op = (const unary_op *)tg_ctx_function(ctx);
    const scalar_args *args = tg_ctx_attrs(ctx);
    tg_tensor *v = tg_ctx_saved(ctx, 0);
    if (!v) return;
    double a = args->a, b = args->b;
    switch (op->kind) {
#define UNARY_GRAD_CASE(KIND, name, api, saves, autocast, expr, grad) \
    case TG_UNARY_##KIND: grad_in[0] = (grad); return;
        TG_UNARY_FLOAT_FORMULAS(UNARY_GRAD_CASE)
#undef UNARY_GRAD_CASE
    default: return; /* TG_UNARY_COUNT */
    }
}

/* Each row of ops/unary_formulas.h with an op (api PLAIN or OWN) gets its tg_function
 * here, named by its name column, with its autocast column; a PLAIN row also gets its
 * public function tg_<name>(x) below, an OWN row's (scalar parameters, checks) is
 * written out. Integers: the kinds with a row in TG_UNARY_INT_FORMULAS. */
#define UNARY_OP_STRUCT(NAME, KIND, AUTOCAST)                                     \
    static const unary_op NAME##_op = {{.name = #NAME,                            \
                                        .num_inputs = 1,                          \
                                        .forward = unary_forward,                 \
                                        .backward = unary_backward,               \
                                        .low_precision = TG_LOW_PRECISION_NATIVE, \
                                        .autocast = TG_AUTOCAST_##AUTOCAST,       \
                                        .onnx = unary_onnx},                      \
                                       TG_UNARY_##KIND}
#define UNARY_OP_PLAIN(KIND, name, autocast) UNARY_OP_STRUCT(name, KIND, autocast);
#define UNARY_OP_OWN(KIND, name, autocast) UNARY_OP_STRUCT(name, KIND, autocast);
#define UNARY_OP_NONE(KIND, name, autocast)
#define UNARY_OP_ROW(KIND, name, api, saves, autocast, expr, grad) UNARY_OP_##api(KIND, name, autocast)
TG_UNARY_FLOAT_FORMULAS(UNARY_OP_ROW)
UNARY_OP_STRUCT(selu, ELU, NONE); /* elu with SELU's fixed alpha and scale */

static tg_tensor *apply_unary(const unary_op *op, tg_tensor *x, double a, double b) {
    scalar_args args = {a, b};
    return tg_apply_args(&op->fn, &x, &args, sizeof args);
}

#define UNARY_PUBLIC_PLAIN(name) \
    tg_tensor *tg_##name(tg_tensor *x) { return apply_unary(&name##_op, x, 0, 0); }
#define UNARY_PUBLIC_OWN(name)
#define UNARY_PUBLIC_NONE(name)
#define UNARY_PUBLIC_ROW(KIND, name, api, saves, autocast, expr, grad) UNARY_PUBLIC_##api(name)
TG_UNARY_FLOAT_FORMULAS(UNARY_PUBLIC_ROW)

/* The dtype of x OP s, as torch.result_type(x, s) with s a Python int when it is
 * integral and a Python float otherwise (C passes both as a double): floating tensors
 * keep their dtype; integer and bool tensors become float32 with a fractional (or
 * infinite, NaN) s and for true division; bool becomes int64 with an integral s. */
static tg_dtype scalar_result_type(tg_dtype x, double s, bool division) {
    if (tg_dtype_is_floating(x)) return x;
    if (division || !isfinite(s) || s != nearbyint(s)) return TG_FLOAT32;
    return x == TG_BOOL ? TG_INT64 : x;
}

static tg_tensor *apply_scalar(const unary_op *op, tg_tensor *x, double s, bool division) {
    if (!x || tg_dtype_is_floating(x->dtype)) return apply_unary(op, x, s, 0); /* the common case: no cast */
    tg_dtype to = scalar_result_type(x->dtype, s, division);
    if (to == x->dtype) return apply_unary(op, x, s, 0);
    tg_tensor *result = NULL;
    TG_SCOPE {
        tg_tensor *y = tg_cast(x, to);
        if (y) result = tg_scope_return(apply_unary(op, y, s, 0));
    }
    return result;
}

tg_tensor *tg_add_scalar(tg_tensor *x, double s) { return apply_scalar(&add_scalar_op, x, s, false); }
tg_tensor *tg_sub_scalar(tg_tensor *x, double s) { return apply_scalar(&add_scalar_op, x, -s, false); }
tg_tensor *tg_mul_scalar(tg_tensor *x, double s) { return apply_scalar(&mul_scalar_op, x, s, false); }
tg_tensor *tg_div_scalar(tg_tensor *x, double s) { return apply_scalar(&div_scalar_op, x, s, true); }
tg_tensor *tg_rsub_scalar(tg_tensor *x, double s) { return apply_scalar(&rsub_scalar_op, x, s, false); }
tg_tensor *tg_pow_scalar(tg_tensor *x, double e) {
    if (x && !tg_dtype_is_floating(x->dtype) && e < 0 && e == nearbyint(e))
        return tg_error("tg_pow_scalar: integers to negative integer powers are not allowed (%s tensor, exponent %g)",
                        tg_dtype_name(x->dtype), e),
               NULL;
    return apply_scalar(&pow_scalar_op, x, e, false);
}
tg_tensor *tg_leaky_relu(tg_tensor *x, double slope) { return apply_unary(&leaky_relu_op, x, slope, 0); }
tg_tensor *tg_elu(tg_tensor *x, double alpha) { return apply_unary(&elu_op, x, alpha, 1); }
tg_tensor *tg_selu(tg_tensor *x) {
    return apply_unary(&selu_op, x, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946);
}

tg_tensor *tg_softplus(tg_tensor *x, double beta, double threshold) {
    if (beta == 0) return tg_error("tg_softplus: beta must be non-zero"), NULL;
    return apply_unary(&softplus_op, x, beta, threshold);
}

tg_tensor *tg_clamp(tg_tensor *x, double min, double max) {
    if (isnan(min) && isnan(max))
        return tg_error("tg_clamp: at least one of min and max must be given (not NaN)"), NULL;
    return apply_unary(&clamp_op, x, min, max);
}

/* (x > a) as 0/1 in x's dtype, never recorded: masks inside backward formulas. */
tg_tensor *tg_gt_mask(tg_tensor *x, double a) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_gt_mask", x, 0), NULL;
    return mask_of("tg_gt_mask", TG_UNARY_GT_SCALAR, x, a);
}

tg_tensor *tg_isfinite(tg_tensor *x) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_isfinite", x, 0), NULL;
    tg_tensor *result = NULL;
    TG_SCOPE {
        if (!tg_dtype_is_floating(x->dtype)) {
            result = tg_scope_return(tg_ones(x->shape, (tg_opts){.dtype = TG_BOOL, .device = x->storage->device}));
        } else {
            tg_tensor *mask = tg_empty_like(x);
            if (mask && !tg_unary_into("tg_isfinite", TG_UNARY_ISFINITE, mask, x, 0, 0))
                result = tg_scope_return(tg_cast(tg_detach(mask), TG_BOOL));
        }
    }
    return result;
}

bool tg_all_finite(tg_tensor *x) {
    if (tg_unusable_(x)) return tg_error_unusable_input("tg_all_finite", x, 0), false;
    if (!tg_dtype_is_floating(x->dtype)) return true;
    bool finite = false;
    TG_SCOPE {
        bool was = tg_set_grad_enabled(false);
        tg_tensor *count = tg_sum(tg_isfinite(x));
        finite = count && (int64_t)tg_item(count) == tg_numel(x);
        tg_set_grad_enabled(was);
    }
    return finite;
}

/* ======================= binary ops ======================= */

typedef struct {
    tg_function fn;
    tg_binary_kind kind;
} binary_op;

static tg_status binary_onnx(tg_onnx_op *op) {
    return tg_binary_to_onnx(op, ((const binary_op *)tg_onnx_function(op))->kind);
}

/* torch.result_type of two tensors: a 0-dim tensor joins the promotion only when its
 * category (bool < integer < floating) is higher than the other's, so float32 [3] *
 * float64 0-dim is float32 and int32 [3] + int64 0-dim is int32, as in PyTorch. */
static tg_dtype result_type(const tg_tensor *a, const tg_tensor *b) {
    if (a->dtype == b->dtype) return a->dtype; /* the common case, whatever the dims */
    bool a0 = a->shape.ndim == 0, b0 = b->shape.ndim == 0;
    if (a0 == b0) return tg_promote_types(a->dtype, b->dtype);
    tg_dtype dim = a0 ? b->dtype : a->dtype, zero = a0 ? a->dtype : b->dtype;
    if (tg_dtype_is_floating(dim)) return dim;
    if (dim == TG_BOOL || tg_dtype_is_floating(zero)) return tg_promote_types(dim, zero);
    return dim;
}

/* Checks, promotes and broadcasts; fills *out_shape and *dtype (of the computation). */
static tg_status binary_prepare(const char *op, tg_tensor *a, tg_tensor *b, tg_shape *out_shape, tg_dtype *dtype) {
    /* The common cases first, inline (per-op overhead): one device, equal shapes. */
    tg_device da = a->storage->device, db = b->storage->device;
    if ((da.kind != db.kind || da.index != db.index) && tg_check_same_device(op, a, b, "all tensors")) return TG_ERROR;
    bool same_shape = a->shape.ndim == b->shape.ndim;
    for (int d = 0; same_shape && d < a->shape.ndim; d++) same_shape = a->shape.dims[d] == b->shape.dims[d];
    if (same_shape) {
        *out_shape = a->shape;
    } else if (!tg_broadcast_shapes(a->shape, b->shape, out_shape)) {
        char sa[128], sb[128];
        return tg_error("%s: shapes %s and %s cannot be broadcast together", op, tg_shape_str(a->shape, sa, sizeof sa),
                        tg_shape_str(b->shape, sb, sizeof sb));
    }
    *dtype = result_type(a, b);
    return TG_OK;
}

/* PyTorch's ZeroDivisionError for integer fmod / remainder: one count read on the host. */
static tg_status integer_zero_divisor(const char *op, tg_tensor *b) {
    tg_status status = TG_OK;
    TG_SCOPE {
        tg_tensor *zeros = tg_sum(tg_cast(
            tg_eq(b, tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = b->dtype, .device = b->storage->device})), TG_INT64));
        tg_tensor *host = zeros ? tg_tensor_to(zeros, TG_CPU) : NULL;
        if (!host) status = TG_ERROR;
        else if (*(const int64_t *)tg_data_ptr(host) > 0)
            status = tg_error("%s: integer division by zero (ZeroDivisionError)", op);
    }
    return status;
}

/* A row's saves column (pow saves too; comparisons have no gradient). */
static bool binary_saves_inputs(tg_binary_kind kind) {
    switch (kind) {
#define BINARY_SAVES_CASE(KIND, name, expr, saves, grad_a, grad_b) \
    case TG_BINARY_##KIND:                                         \
        return BINARY_SAVES_##saves;
#define BINARY_SAVES_AB true
#define BINARY_SAVES_NONE false
        TG_BINARY_FORMULAS(BINARY_SAVES_CASE)
        TG_BINARY_FLOAT_FORMULAS(BINARY_SAVES_CASE)
#undef BINARY_SAVES_CASE
    case TG_BINARY_POW: return true;
    default: return false;
    }
}

static tg_tensor *binary_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const binary_op *op = (const binary_op *)tg_ctx_function(ctx);
    tg_tensor *a = in[0], *b = in[1];
    tg_shape shape;
    tg_dtype dtype;
    if (binary_prepare(op->fn.name, a, b, &shape, &dtype)) return NULL;
    if ((op->kind == TG_BINARY_DIV || op->kind == TG_BINARY_ATAN2) && !tg_dtype_is_floating(dtype)) dtype = TG_FLOAT32;
    bool modulo = op->kind == TG_BINARY_FMOD || op->kind == TG_BINARY_REMAINDER;
    if (modulo && (dtype == TG_BOOL || dtype == TG_UINT8))
        return tg_error("%s: not implemented for %s (cast to int64 or a floating dtype first)", op->fn.name,
                        tg_dtype_name(dtype)),
               NULL;
    if (a->dtype != dtype) a = tg_cast(a, dtype);
    if (b->dtype != dtype) b = tg_cast(b, dtype);
    if (!a || !b) return NULL;
    if (modulo && !tg_dtype_is_floating(dtype) && integer_zero_divisor(op->fn.name, b)) return NULL;
    tg_dtype out_dtype = TG_BINARY_IS_COMPARISON(op->kind) ? TG_BOOL : dtype;
    tg_tensor *out = tg_empty(shape, (tg_opts){.dtype = out_dtype, .device = a->storage->device});
    if (!out || tg_binary_into(op->fn.name, op->kind, out, a, b)) return NULL;
    if (binary_saves_inputs(op->kind)) {
        tg_ctx_save(ctx, in[0]);
        tg_ctx_save(ctx, in[1]);
    }
    return out;
}

/* maximum / minimum: PyTorch's where(a == b, g / 2, g).masked_fill_(a loses, 0): the
 * winner takes the gradient, ties split it, a NaN passes it to both. which: 0 for a, 1 for b. */
static tg_tensor *extremum_grad(tg_tensor *g, tg_tensor *a, tg_tensor *b, bool max, int which) {
    tg_tensor *diff = max ? tg_sub(a, b) : tg_sub(b, a);
    tg_tensor *loses = which == 0 ? tg_gt_mask(tg_neg(diff), 0) : tg_gt_mask(diff, 0);
    tg_tensor *half_tie = tg_mul_scalar(tg_cast(tg_eq(a, b), tg_dtype_of(diff)), 0.5);
    return tg_mul(g, tg_rsub_scalar(tg_add(loses, half_tie), 1));
}

/* a^b: b a^(b-1), 0 where b == 0; a^b log(a), 0 where a == 0 and b >= 0 (PyTorch). */
static tg_tensor *pow_grad(tg_tensor *g, tg_tensor *a, tg_tensor *b, int which) {
    tg_tensor *zero = tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = tg_dtype_of(g), .device = tg_device_of(g)});
    if (which == 0) return tg_mul(g, tg_where(tg_eq(b, zero), zero, tg_mul(b, tg_pow(a, tg_sub_scalar(b, 1)))));
    tg_tensor *d = tg_mul(tg_pow(a, b), tg_log(a));
    return tg_mul(g, tg_where(tg_eq(a, zero), tg_where(tg_ge(b, zero), zero, d), d));
}

/* A row's grad_a and grad_b columns, each only for an input that needs it. */
static void binary_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const binary_op *op = (const binary_op *)tg_ctx_function(ctx);
    tg_tensor *a = NULL, *b = NULL;
    if (binary_saves_inputs(op->kind)) {
        a = tg_ctx_saved(ctx, 0);
        b = tg_ctx_saved(ctx, 1);
        if (!a || !b) return;
    }
    bool need_a = tg_ctx_needs_input_grad(ctx, 0), need_b = tg_ctx_needs_input_grad(ctx, 1);
    switch (op->kind) {
#define BINARY_GRAD_CASE(KIND, name, expr, saves, grad_a, grad_b) \
    case TG_BINARY_##KIND:                                        \
        if (need_a) grad_in[0] = (grad_a);                        \
        if (need_b) grad_in[1] = (grad_b);                        \
        return;
        TG_BINARY_FORMULAS(BINARY_GRAD_CASE)
        TG_BINARY_FLOAT_FORMULAS(BINARY_GRAD_CASE)
#undef BINARY_GRAD_CASE
    case TG_BINARY_POW:
        if (need_a) grad_in[0] = pow_grad(g, a, b, 0);
        if (need_b) grad_in[1] = pow_grad(g, a, b, 1);
        return;
    default: return; /* comparisons have none */
    }
}

/* Each row's tg_function and public function tg_<name>(a, b); pow's by hand. */
#define BINARY_OP_AUTOCAST(NAME, KIND, BACKWARD, AUTOCAST)                         \
    static const binary_op NAME##_op = {{.name = #NAME,                            \
                                         .num_inputs = 2,                          \
                                         .forward = binary_forward,                \
                                         .backward = BACKWARD,                     \
                                         .low_precision = TG_LOW_PRECISION_NATIVE, \
                                         .autocast = AUTOCAST,                     \
                                         .onnx = binary_onnx},                     \
                                        KIND};                                     \
    tg_tensor *tg_##NAME(tg_tensor *a, tg_tensor *b) { return tg_apply(&NAME##_op.fn, (tg_tensor *[]){a, b}); }
#define BINARY_OP_ROW(KIND, name, expr, saves, grad_a, grad_b) \
    BINARY_OP_AUTOCAST(name, TG_BINARY_##KIND, binary_backward, TG_AUTOCAST_NONE)
#define COMPARE_OP_ROW(KIND, name, expr) BINARY_OP_AUTOCAST(name, TG_BINARY_##KIND, NULL, TG_AUTOCAST_NONE)
TG_BINARY_FORMULAS(BINARY_OP_ROW)
TG_BINARY_FLOAT_FORMULAS(BINARY_OP_ROW)
TG_BINARY_COMPARE_FORMULAS(COMPARE_OP_ROW)
BINARY_OP_AUTOCAST(pow, TG_BINARY_POW, binary_backward, TG_AUTOCAST_FLOAT32_ON_CUDA)

/* ======================= where ======================= */

typedef struct {
    tg_tensor *cond; /* borrowed by the typed rows below */
} where_ctx;

#define WHERE_ROW(NAME, T)                                                                                        \
    static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) {                                         \
        for (int64_t i = 0; i < n; i++)                                                                           \
            *(T *)(p[0] + i * s[0]) =                                                                             \
                *(const bool *)(p[1] + i * s[1]) ? *(const T *)(p[2] + i * s[2]) : *(const T *)(p[3] + i * s[3]); \
    }
WHERE_ROW(where_row_1, uint8_t)
WHERE_ROW(where_row_2, uint16_t)
WHERE_ROW(where_row_4, uint32_t)
WHERE_ROW(where_row_8, uint64_t)

static tg_tensor *where_forward(tg_ctx *ctx, tg_tensor *const *in) {
    tg_tensor *cond = in[0], *a = in[1], *b = in[2];
    char s1[128], s2[128], s3[128];
    if (cond->dtype != TG_BOOL)
        return tg_error("tg_where: condition must be bool, got %s", tg_dtype_name(cond->dtype)), NULL;
    if (tg_check_same_device("tg_where", cond, a, "all tensors") ||
        tg_check_same_device("tg_where", a, b, "all tensors"))
        return NULL;
    tg_shape ab, shape;
    if (!tg_broadcast_shapes(a->shape, b->shape, &ab) || !tg_broadcast_shapes(cond->shape, ab, &shape))
        return tg_error("tg_where: shapes %s (condition), %s and %s cannot be broadcast together",
                        tg_shape_str(cond->shape, s1, sizeof s1), tg_shape_str(a->shape, s2, sizeof s2),
                        tg_shape_str(b->shape, s3, sizeof s3)),
               NULL;
    tg_dtype dtype = tg_promote_types(a->dtype, b->dtype);
    if (a->dtype != dtype) a = tg_cast(a, dtype);
    if (b->dtype != dtype) b = tg_cast(b, dtype);
    tg_tensor *out = a && b ? tg_empty(shape, (tg_opts){.dtype = dtype, .device = a->storage->device}) : NULL;
    if (!out) return NULL;
    if (tg_on_cuda(out)) {
        if (TG_CUDA_CALL("tg_where", tg_cuda_where, out, cond, a, b)) return NULL;
    } else {
        size_t es = tg_dtype_size(dtype);
        tg_iter it;
        tg_tensor *ops[4] = {out, cond, a, b};
        tg_iter_init(&it, &shape, 4, ops);
        tg_iter_run(&it,
                    es == 1   ? where_row_1
                    : es == 2 ? where_row_2
                    : es == 4 ? where_row_4
                              : where_row_8,
                    NULL, true);
    }
    tg_ctx_save(ctx, cond);
    return out;
}

static void where_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    tg_tensor *cond = tg_ctx_saved(ctx, 0);
    if (!cond) return;
    tg_tensor *zero = tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = tg_dtype_of(g), .device = tg_device_of(g)});
    if (tg_ctx_needs_input_grad(ctx, 1)) grad_in[1] = tg_where(cond, g, zero);
    if (tg_ctx_needs_input_grad(ctx, 2)) grad_in[2] = tg_where(cond, zero, g);
}

static tg_status where_onnx(tg_onnx_op *op) { return tg_onnx_add_node_same(op, "Where") ? TG_OK : TG_ERROR; }

static const tg_function where_fn = {.name = "where",
                                     .num_inputs = 3,
                                     .forward = where_forward,
                                     .backward = where_backward,
                                     .low_precision = TG_LOW_PRECISION_NATIVE,
                                     .autocast = TG_AUTOCAST_NONE,
                                     .onnx = where_onnx};

tg_tensor *tg_where(tg_tensor *cond, tg_tensor *a, tg_tensor *b) {
    return tg_apply(&where_fn, (tg_tensor *[]){cond, a, b});
}

/* ======================= cast ======================= */

static tg_tensor *cast_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const tg_dtype *dtype = tg_ctx_attrs(ctx);
    if (!tg_dtype_is_supported(*dtype)) return tg_error("tg_cast: dtype %d is not a tg_dtype", (int)*dtype), NULL;
    tg_tensor *out = tg_empty(in[0]->shape, (tg_opts){.dtype = *dtype, .device = in[0]->storage->device});
    if (!out || tg_copy_values_(out, in[0])) return NULL;
    return out;
}

static void cast_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    grad_in[0] = tg_cast(g, tg_ctx_input_dtype(ctx, 0));
}

static tg_status cast_onnx(tg_onnx_op *op) {
    tg_onnx_node *n = tg_onnx_add_node_same(op, "Cast");
    tg_onnx_attr_int(n, "to", tg_onnx_dtype(tg_onnx_output(op, 0)->dtype));
    return n ? TG_OK : TG_ERROR;
}

static const tg_function cast_fn = {.name = "cast",
                                    .num_inputs = 1,
                                    .forward = cast_forward,
                                    .backward = cast_backward,
                                    .low_precision = TG_LOW_PRECISION_NATIVE,
                                    .autocast = TG_AUTOCAST_NONE,
                                    .onnx = cast_onnx};

tg_tensor *tg_cast(tg_tensor *x, tg_dtype dtype) {
    if (x && x->dtype == dtype) return tg_scope_track(tg_retain(x));
    return tg_apply_args(&cast_fn, &x, &dtype, sizeof dtype);
}

/* ======================= in place (rules in ops/inplace.h) ======================= */

/* torch.can_cast for in-place results: not floating into integers, nor anything but
 * bool into bool. */
static bool can_cast(tg_dtype from, tg_dtype to) {
    if (tg_dtype_is_floating(from) && !tg_dtype_is_floating(to)) return false;
    return !(to == TG_BOOL && from != TG_BOOL);
}

static tg_status check_result_type(const char *op, tg_dtype result, tg_dtype target) {
    if (can_cast(result, target)) return TG_OK;
    return tg_error("%s: result type %s can't be cast to the desired output type %s", op, tg_dtype_name(result),
                    tg_dtype_name(target));
}

/* a = a (op) alpha * b, b broadcast to a. */
static tg_status binary_inplace(const char *op, tg_binary_kind kind, tg_tensor *a, tg_tensor *b, double alpha) {
    if (tg_unusable_(a)) return tg_error_unusable_input(op, a, 0);
    if (tg_unusable_(b)) return tg_error_unusable_input(op, b, 1);
    tg_shape shape;
    tg_dtype dtype;
    if (binary_prepare(op, a, b, &shape, &dtype)) return TG_ERROR;
    if (!tg_shape_equal(shape, a->shape)) {
        char sa[128], sb[128];
        return tg_error("%s: shape %s cannot be broadcast to the in-place target's shape %s", op,
                        tg_shape_str(b->shape, sb, sizeof sb), tg_shape_str(a->shape, sa, sizeof sa));
    }
    if (alpha != 1) dtype = scalar_result_type(dtype, alpha, false);
    if (check_result_type(op, dtype, a->dtype)) return TG_ERROR;
    tg_status status = TG_ERROR;
    TG_SCOPE {
        bool record = false;
        if (!tg_inplace_check(op, a, &b, 1, &record)) {
            tg_tensor *bc = tg_cast(alpha != 1 ? tg_mul_scalar(b, alpha) : b, a->dtype);
            if (bc && record) { /* mul saves its inputs: give it a copy of a's old value */
                status = tg_inplace_commit(a, kind == TG_BINARY_MUL ? tg_mul(tg_clone(a), bc) : tg_add(a, bc));
            } else if (bc && !tg_binary_into(op, kind, a, a, bc)) {
                a->storage->version++;
                status = TG_OK;
            }
        }
    }
    return status;
}

tg_status tg_add_(tg_tensor *a, tg_tensor *b) { return binary_inplace("tg_add_", TG_BINARY_ADD, a, b, 1); }
tg_status tg_mul_(tg_tensor *a, tg_tensor *b) { return binary_inplace("tg_mul_", TG_BINARY_MUL, a, b, 1); }
tg_status tg_add_scaled_(tg_tensor *a, tg_tensor *b, double alpha) {
    return binary_inplace("tg_add_scaled_", TG_BINARY_ADD, a, b, alpha);
}

tg_status tg_mul_scalar_(tg_tensor *a, double s) {
    bool record = false;
    if (tg_inplace_check("tg_mul_scalar_", a, NULL, 0, &record) ||
        check_result_type("tg_mul_scalar_", scalar_result_type(a->dtype, s, false), a->dtype))
        return TG_ERROR;
    if (record) {
        tg_status status = TG_ERROR;
        TG_SCOPE { status = tg_inplace_commit(a, tg_mul_scalar(a, s)); }
        return status;
    }
    if (tg_unary_into("tg_mul_scalar_", TG_UNARY_MUL_SCALAR, a, a, s, 0)) return TG_ERROR;
    a->storage->version++;
    return TG_OK;
}
