/* Elementwise ops: definitions (checks, result shape and dtype, backward formulas)
 * and CPU kernels. CUDA kernels: ops/cuda/elementwise.cu. */
#include "ops/elementwise.h"
#include "ops/inplace.h"

#include <math.h>
#include <string.h>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/convert.h"
#include "core/iter.h"
#include "core/scope.h"
#include "core/simd.h"
#include "core/tensor_impl.h"
#include "ops/cuda/elementwise.h"
#include "ops/dispatch.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/binary_formulas.h"
#include "ops/unary_formulas.h"

/* ======================= CPU kernels ======================= */

/* libm by type, for ops/unary_formulas.h's rows. */
#define TG_EXP(x) _Generic((x), float: expf, default: exp)(x)
#define TG_LOG(x) _Generic((x), float: logf, default: log)(x)
#define TG_LOG1P(x) _Generic((x), float: log1pf, default: log1p)(x)
#define TG_SQRT(x) _Generic((x), float: sqrtf, default: sqrt)(x)
#define TG_TANH(x) _Generic((x), float: tanhf, default: tanh)(x)
#define TG_ERF(x) _Generic((x), float: erff, default: erf)(x)
#define TG_POW(x, y) _Generic((x), float: powf, default: pow)(x, y)
#define TG_FABS(x) _Generic((x), float: fabsf, default: fabs)(x)
#define TG_SIN(x) _Generic((x), float: sinf, default: sin)(x)
#define TG_COS(x) _Generic((x), float: cosf, default: cos)(x)
#define TG_EXPM1(x) _Generic((x), float: expm1f, default: expm1)(x)
#define TG_FLOOR(x) _Generic((x), float: floorf, default: floor)(x)
#define TG_CEIL(x) _Generic((x), float: ceilf, default: ceil)(x)
#define TG_NEARBYINT(x) _Generic((x), float: nearbyintf, default: nearbyint)(x)
#define TG_TRUNC(x) _Generic((x), float: truncf, default: trunc)(x)
#define UNARY_CPU_CASE(KIND, expr) \
    case TG_UNARY_##KIND: UNARY_LOOP(scalar_t, expr); break;

#define UNARY_LOOP(T, expr)                                                 \
    do {                                                                    \
        if (s[0] == sizeof(T) && s[1] == sizeof(T)) {                       \
            T *restrict o = (T *)p[0];                                      \
            const T *restrict in = (const T *)p[1];                         \
            for (int64_t i = 0; i < n; i++) {                               \
                T x = in[i];                                                \
                o[i] = (expr);                                              \
            }                                                               \
        } else {                                                            \
            for (int64_t i = 0; i < n; i++) {                               \
                T x = *(const T *)(p[1] + i * s[1]);                        \
                *(T *)(p[0] + i * s[0]) = (expr);                           \
            }                                                               \
        }                                                                   \
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
        TG_UNARY_FLOAT_FORMULAS(UNARY_CPU_CASE)
    default: break;
    }
}

TG_VECTOR_CLONES static void unary_row_f64(char **p, const int64_t *s, int64_t n, void *vctx) {
    typedef double scalar_t;
    const unary_ctx *c = vctx;
    const scalar_t a = c->a, b = c->b;
    switch (c->kind) {
        TG_UNARY_FLOAT_FORMULAS(UNARY_CPU_CASE)
    default: break;
    }
}

#define IABS(x) ((x) < 0 ? -(x) : (x))
#define IPOW(T, x, e) ((T)pow((double)(x), (double)(e)))

/* Integers: the kinds that make sense for them. */
#define INT_UNARY_ROW(NAME, T)                                                  \
    static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) {       \
        const unary_ctx *c = vctx;                                              \
        const T a = (T)(int64_t)c->a, b = (T)(int64_t)c->b;                     \
        (void)b;                                                                \
        switch (c->kind) {                                                      \
        case TG_UNARY_NEG: UNARY_LOOP(T, -x); break;                            \
        case TG_UNARY_ADD_SCALAR: UNARY_LOOP(T, x + a); break;                  \
        case TG_UNARY_MUL_SCALAR: UNARY_LOOP(T, x * a); break;                  \
        case TG_UNARY_RSUB_SCALAR: UNARY_LOOP(T, a - x); break;                 \
        case TG_UNARY_ABS: UNARY_LOOP(T, IABS(x)); break;                       \
        case TG_UNARY_SIGN: UNARY_LOOP(T, (T)((x > 0) - (x < 0))); break;       \
        case TG_UNARY_RELU: UNARY_LOOP(T, x > 0 ? x : 0); break;                \
        case TG_UNARY_SQUARE: UNARY_LOOP(T, x * x); break;                      \
        case TG_UNARY_POW_SCALAR: UNARY_LOOP(T, IPOW(T, x, a)); break;             \
        case TG_UNARY_CLAMP:                                                    \
            UNARY_LOOP(T, (c->b == c->b && ((c->a == c->a && x < a) ? a : x) > b) ? b      \
                                 : (c->a == c->a && x < a) ? a : x);                         \
            break;                                                              \
        default: break;                                                         \
        }                                                                       \
    }
INT_UNARY_ROW(unary_row_i64, int64_t)
INT_UNARY_ROW(unary_row_i32, int32_t)

static bool int_kind_ok(tg_unary_kind k) {
    switch (k) {
    case TG_UNARY_NEG: case TG_UNARY_ADD_SCALAR: case TG_UNARY_MUL_SCALAR: case TG_UNARY_RSUB_SCALAR:
    case TG_UNARY_ABS: case TG_UNARY_SIGN: case TG_UNARY_RELU: case TG_UNARY_SQUARE:
    case TG_UNARY_POW_SCALAR: case TG_UNARY_CLAMP:
        return true;
    default:
        return false;
    }
}

/* Fast paths: all contiguous, or b (or a) a broadcast scalar; then the general one. */
#define BINARY_LOOP(T, OUT, expr)                                                          \
    do {                                                                                   \
        const int64_t es = sizeof(T), os = sizeof(OUT);                                    \
        if (s[0] == os && s[1] == es && s[2] == es) {                                      \
            OUT *restrict o = (OUT *)p[0];                                                 \
            const T *restrict pa = (const T *)p[1], *restrict pb = (const T *)p[2];        \
            for (int64_t i = 0; i < n; i++) {                                              \
                T x = pa[i], y = pb[i];                                                    \
                o[i] = (expr);                                                             \
            }                                                                              \
        } else if (s[0] == os && s[1] == es && s[2] == 0) {                                \
            OUT *restrict o = (OUT *)p[0];                                                 \
            const T *restrict pa = (const T *)p[1];                                        \
            const T y = *(const T *)p[2];                                                  \
            for (int64_t i = 0; i < n; i++) {                                              \
                T x = pa[i];                                                               \
                o[i] = (expr);                                                             \
            }                                                                              \
        } else if (s[0] == os && s[1] == 0 && s[2] == es) {                                \
            OUT *restrict o = (OUT *)p[0];                                                 \
            const T *restrict pb = (const T *)p[2];                                        \
            const T x = *(const T *)p[1];                                                  \
            for (int64_t i = 0; i < n; i++) {                                              \
                T y = pb[i];                                                               \
                o[i] = (expr);                                                             \
            }                                                                              \
        } else {                                                                           \
            for (int64_t i = 0; i < n; i++) {                                              \
                T x = *(const T *)(p[1] + i * s[1]), y = *(const T *)(p[2] + i * s[2]);    \
                *(OUT *)(p[0] + i * s[0]) = (expr);                                        \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* The rows of ops/binary_formulas.h; pow per type; EXTRA: the float or int table. */
#define BINARY_CPU_CASE(KIND, expr) \
    case TG_BINARY_##KIND: BINARY_LOOP(scalar_t, scalar_t, expr); break;
#define COMPARE_CPU_CASE(KIND, expr) \
    case TG_BINARY_##KIND: BINARY_LOOP(scalar_t, bool, expr); break;
#define NO_ROWS(X)
#define BINARY_ROW(NAME, T, POW, EXTRA)                                   \
    TG_VECTOR_CLONES static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) { \
        typedef T scalar_t;                                               \
        switch (*(const tg_binary_kind *)vctx) {                          \
            TG_BINARY_FORMULAS(BINARY_CPU_CASE)                           \
            TG_BINARY_COMPARE_FORMULAS(COMPARE_CPU_CASE)                  \
            EXTRA(BINARY_CPU_CASE)                                        \
        case TG_BINARY_POW: BINARY_LOOP(T, T, POW(x, y)); break;          \
        default: break;                                                   \
        }                                                                 \
    }
#define IPOW2(x, y) ((int64_t)pow((double)(x), (double)(y)))
#define TG_ATAN2(x, y) _Generic((x), float: atan2f, default: atan2)(x, y)
#define TG_FMOD(x, y) _Generic((x), float: fmodf, default: fmod)(x, y)
BINARY_ROW(binary_row_f32, float, powf, TG_BINARY_FLOAT_FORMULAS)
BINARY_ROW(binary_row_f64, double, pow, TG_BINARY_FLOAT_FORMULAS)
BINARY_ROW(binary_row_i64, int64_t, IPOW2, TG_BINARY_INT_FORMULAS)
BINARY_ROW(binary_row_i32, int32_t, IPOW2, TG_BINARY_INT_FORMULAS)
BINARY_ROW(binary_row_u8, uint8_t, IPOW2, NO_ROWS)
/* bool arithmetic follows C's (true * true == true); only comparisons matter in practice. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wint-in-bool-context"
BINARY_ROW(binary_row_bool, bool, IPOW2, NO_ROWS)
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

static tg_status low_precision_into(const char *op, int kind, bool binary, tg_tensor *out, tg_tensor *x,
                                    tg_tensor *y, double a, double b) {
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
    return out->storage->device.kind == TG_DEVICE_CUDA && tg_dtype_is_low_precision(a->dtype) &&
           (!b || b->dtype == a->dtype) && out->dtype == (compare ? TG_BOOL : a->dtype);
}

tg_status tg_unary_into(const char *op, tg_unary_kind kind, tg_tensor *out, tg_tensor *x, double a, double b) {
    if (tg_dtype_is_low_precision(x->dtype) || tg_dtype_is_low_precision(out->dtype)) {
        if (cuda_low_precision_native(out, x, NULL, false)) return TG_CUDA_CALL(op, tg_cuda_unary, kind, out, x, a, b);
        return low_precision_into(op, kind, false, out, x, NULL, a, b);
    }
    if (out->storage->device.kind == TG_DEVICE_CUDA) return TG_CUDA_CALL(op, tg_cuda_unary, kind, out, x, a, b);
    tg_iter_row_fn row = NULL;
    switch (x->dtype) {
    case TG_FLOAT32: row = unary_row_f32; break;
    case TG_FLOAT64: row = unary_row_f64; break;
    case TG_INT64: row = int_kind_ok(kind) ? unary_row_i64 : NULL; break;
    case TG_INT32: row = int_kind_ok(kind) ? unary_row_i32 : NULL; break;
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
    if (out->storage->device.kind == TG_DEVICE_CUDA) return TG_CUDA_CALL(op, tg_cuda_binary, kind, out, a, b);
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
    tg_function fn; /* first, so tg_ctx_function gives back the whole struct */
    tg_unary_kind kind;
    bool integers_ok;
} unary_op;

typedef struct {
    double a, b;
} scalar_args;

static tg_tensor *unary_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const unary_op *op = (const unary_op *)tg_ctx_function(ctx);
    const scalar_args *args = tg_ctx_attrs(ctx);
    tg_tensor *x = in[0];
    if (!tg_dtype_is_floating(x->dtype) && !(op->integers_ok && int_kind_ok(op->kind)))
        return tg_error("%s: expected a floating-point tensor, got %s", op->fn.name, tg_dtype_name(x->dtype)), NULL;
    tg_tensor *out = tg_empty_like(x);
    if (!out || tg_unary_into(op->fn.name, op->kind, out, x, args->a, args->b)) return NULL;
    switch (op->kind) { /* the ones whose backward is cheapest from the output */
    case TG_UNARY_EXP: case TG_UNARY_SQRT: case TG_UNARY_RSQRT: case TG_UNARY_SIGMOID:
    case TG_UNARY_TANH: case TG_UNARY_RECIPROCAL:
        tg_ctx_save(ctx, out);
        break;
    default:
        tg_ctx_save(ctx, x);
    }
    return out;
}

/* A 0/1 mask of x's dtype from a comparison kind (TG_UNARY_GT_SCALAR, ...); not recorded. */
static tg_tensor *mask_of(const char *op, tg_unary_kind kind, tg_tensor *x, double a) {
    tg_tensor *out = tg_empty_like(x);
    if (!out || tg_unary_into(op, kind, out, x, a, 0)) return NULL;
    return out;
}

/* !(x <= 0): relu's gradient mask (1 at NaN, as PyTorch's threshold_backward). */
static tg_tensor *relu_mask(tg_tensor *x) { return mask_of("relu backward", TG_UNARY_NOT_LE_SCALAR, x, 0); }

/* d/dx of each kind, as ops on x (or on the saved output y). */
static void unary_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const unary_op *op = (const unary_op *)tg_ctx_function(ctx);
    const scalar_args *args = tg_ctx_attrs(ctx);
    tg_tensor *v = tg_ctx_saved(ctx, 0); /* x, or y for the kinds saved above */
    if (!v) return;
    double a = args->a, b = args->b;
    tg_tensor *d = NULL;
    switch (op->kind) {
    case TG_UNARY_NEG: grad_in[0] = tg_neg(g); return;
    case TG_UNARY_ADD_SCALAR: grad_in[0] = g; return;
    case TG_UNARY_MUL_SCALAR: grad_in[0] = tg_mul_scalar(g, a); return;
    case TG_UNARY_DIV_SCALAR: grad_in[0] = tg_div_scalar(g, a); return;
    case TG_UNARY_RSUB_SCALAR: grad_in[0] = tg_neg(g); return;
    case TG_UNARY_EXP: d = v; break;
    case TG_UNARY_LOG: grad_in[0] = tg_div(g, v); return;
    case TG_UNARY_POW_SCALAR:
        d = a == 0 ? tg_zeros_like(v) : tg_mul_scalar(tg_pow_scalar(v, a - 1), a);
        break;
    case TG_UNARY_SQRT: grad_in[0] = tg_div(g, tg_mul_scalar(v, 2)); return;
    case TG_UNARY_RSQRT: d = tg_mul_scalar(tg_pow_scalar(v, 3), -0.5); break;
    case TG_UNARY_ABS: case TG_UNARY_SIGN:
        d = op->kind == TG_UNARY_ABS ? tg_sign(v) : tg_zeros_like(v);
        break;
    case TG_UNARY_RELU: d = relu_mask(v); break; /* PyTorch's threshold_backward: NaN passes */
    case TG_UNARY_LEAKY_RELU: d = tg_add_scalar(tg_mul_scalar(tg_gt_mask(v, 0), 1 - a), a); break;
    case TG_UNARY_SIGMOID: d = tg_mul(v, tg_rsub_scalar(v, 1)); break;
    case TG_UNARY_TANH: d = tg_rsub_scalar(tg_mul(v, v), 1); break;
    case TG_UNARY_GELU: { /* Phi(x) + x phi(x) */
        tg_tensor *cdf = tg_mul_scalar(tg_add_scalar(tg_erf(tg_mul_scalar(v, TG_SQRT1_2)), 1), 0.5);
        tg_tensor *pdf = tg_mul_scalar(tg_exp(tg_mul_scalar(tg_mul(v, v), -0.5)), 0.39894228040143267794);
        d = tg_add(cdf, tg_mul(v, pdf));
        break;
    }
    case TG_UNARY_GELU_TANH: { /* 0.5(1+t) + 0.5x(1-t^2) k (1 + 3c x^2), t = tanh(k(x + c x^3)) */
        tg_tensor *x2 = tg_mul(v, v);
        tg_tensor *t = tg_tanh(tg_mul_scalar(tg_add(v, tg_mul_scalar(tg_mul(x2, v), 0.044715)), TG_SQRT2_PI));
        tg_tensor *left = tg_mul_scalar(tg_add_scalar(t, 1), 0.5);
        tg_tensor *inner = tg_mul_scalar(tg_add_scalar(tg_mul_scalar(x2, 3 * 0.044715), 1), TG_SQRT2_PI);
        d = tg_add(left, tg_mul(tg_mul_scalar(v, 0.5), tg_mul(tg_rsub_scalar(tg_mul(t, t), 1), inner)));
        break;
    }
    case TG_UNARY_SILU: {
        tg_tensor *s = tg_sigmoid(v);
        d = tg_mul(s, tg_add_scalar(tg_mul(v, tg_rsub_scalar(s, 1)), 1));
        break;
    }
    case TG_UNARY_SOFTPLUS: { /* sigmoid(beta x) below the threshold, 1 above */
        tg_tensor *bx = tg_mul_scalar(v, a);
        tg_tensor *above = tg_gt_mask(bx, b);
        d = tg_add(above, tg_mul(tg_rsub_scalar(above, 1), tg_sigmoid(bx)));
        break;
    }
    case TG_UNARY_CLAMP: { /* 1 where min <= x <= max */
        tg_tensor *below = isnan(a) ? tg_zeros_like(v) : tg_gt_mask(tg_rsub_scalar(v, a), 0);
        tg_tensor *over = isnan(b) ? tg_zeros_like(v) : tg_gt_mask(v, b);
        d = tg_mul(tg_rsub_scalar(below, 1), tg_rsub_scalar(over, 1)); /* 0 everywhere when min > max */
        d = tg_mul(d, tg_cast(tg_eq(v, v), v->dtype));                  /* and at NaN, as PyTorch */
        break;
    }
    case TG_UNARY_ERF:
        d = tg_mul_scalar(tg_exp(tg_neg(tg_mul(v, v))), 1.12837916709551257390);
        break;
    case TG_UNARY_RECIPROCAL: d = tg_neg(tg_mul(v, v)); break;
    case TG_UNARY_SQUARE: d = tg_mul_scalar(v, 2); break;
    case TG_UNARY_SIN: d = tg_cos(v); break;
    case TG_UNARY_COS: d = tg_neg(tg_sin(v)); break;
    case TG_UNARY_EXPM1: d = tg_exp(v); break;
    case TG_UNARY_LOG1P: grad_in[0] = tg_div(g, tg_add_scalar(v, 1)); return;
    case TG_UNARY_LOGSIGMOID: d = tg_sigmoid(tg_neg(v)); break;
    case TG_UNARY_ELU: { /* a b e^x at or below 0, b above (PyTorch's elu_backward) */
        tg_tensor *above = tg_gt_mask(v, 0);
        d = tg_add(tg_mul_scalar(above, b), tg_mul(tg_rsub_scalar(above, 1), tg_mul_scalar(tg_exp(v), a * b)));
        break;
    }
    case TG_UNARY_MISH: { /* t + x sigmoid(x) (1 - t^2), t = tanh(log1p(e^x)) */
        tg_tensor *t = tg_tanh(tg_log1p(tg_exp(v)));
        d = tg_add(t, tg_mul(tg_mul(v, tg_sigmoid(v)), tg_rsub_scalar(tg_mul(t, t), 1)));
        break;
    }
    case TG_UNARY_HARDSWISH: { /* 0 below -3, x/3 + 1/2 from -3 to below 3, 1 from 3 (PyTorch 1.13) */
        tg_tensor *below = tg_gt_mask(tg_neg(v), 3), *above = tg_rsub_scalar(tg_gt_mask(tg_neg(v), -3), 1);
        tg_tensor *inside = tg_mul(tg_rsub_scalar(above, 1), tg_add_scalar(tg_div_scalar(v, 3), 0.5));
        d = tg_mul(tg_rsub_scalar(below, 1), tg_add(inside, above));
        break;
    }
    case TG_UNARY_HARDSIGMOID: /* 1/6 strictly inside (-3, 3), as PyTorch's: 1/6 rounded to float32 */
        d = tg_mul_scalar(tg_mul(tg_gt_mask(v, -3), tg_gt_mask(tg_neg(v), -3)), (double)(1.0f / 6.0f));
        break;
    default: d = tg_zeros_like(v); break; /* sign, floor, ceil, round, trunc */
    }
    grad_in[0] = tg_mul(g, d);
}

#define UNARY_OP_AUTOCAST(NAME, KIND, INTS, AUTOCAST)                                                      \
    static const unary_op NAME##_op = {                                                                      \
        {#NAME, 1, unary_forward, unary_backward, 0, TG_LOW_PRECISION_NATIVE, AUTOCAST}, KIND, INTS}
#define UNARY_OP(NAME, KIND, INTS) UNARY_OP_AUTOCAST(NAME, KIND, INTS, TG_AUTOCAST_NONE)
/* PyTorch's CUDA autocast float32 list: exp, log, pow, rsqrt, ... */
#define UNARY_OP_F32_ON_CUDA(NAME, KIND, INTS) UNARY_OP_AUTOCAST(NAME, KIND, INTS, TG_AUTOCAST_FLOAT32_ON_CUDA)
UNARY_OP(neg, TG_UNARY_NEG, true);
UNARY_OP_F32_ON_CUDA(exp, TG_UNARY_EXP, false);
UNARY_OP_F32_ON_CUDA(log, TG_UNARY_LOG, false);
UNARY_OP(add_scalar, TG_UNARY_ADD_SCALAR, true);
UNARY_OP(mul_scalar, TG_UNARY_MUL_SCALAR, true);
UNARY_OP(rsub_scalar, TG_UNARY_RSUB_SCALAR, true);
UNARY_OP(div_scalar, TG_UNARY_DIV_SCALAR, false);
UNARY_OP_F32_ON_CUDA(pow_scalar, TG_UNARY_POW_SCALAR, true);
UNARY_OP(sqrt, TG_UNARY_SQRT, false);
UNARY_OP_F32_ON_CUDA(rsqrt, TG_UNARY_RSQRT, false);
UNARY_OP(abs, TG_UNARY_ABS, true);
UNARY_OP(sign, TG_UNARY_SIGN, true);
UNARY_OP(relu, TG_UNARY_RELU, true);
UNARY_OP(leaky_relu, TG_UNARY_LEAKY_RELU, false);
UNARY_OP(sigmoid, TG_UNARY_SIGMOID, false);
UNARY_OP(tanh, TG_UNARY_TANH, false);
UNARY_OP(gelu, TG_UNARY_GELU, false);
UNARY_OP(gelu_tanh, TG_UNARY_GELU_TANH, false);
UNARY_OP(silu, TG_UNARY_SILU, false);
UNARY_OP_F32_ON_CUDA(softplus, TG_UNARY_SOFTPLUS, false);
UNARY_OP(clamp, TG_UNARY_CLAMP, true);
UNARY_OP(erf, TG_UNARY_ERF, false);
UNARY_OP_F32_ON_CUDA(reciprocal, TG_UNARY_RECIPROCAL, false);
UNARY_OP(square, TG_UNARY_SQUARE, true);
UNARY_OP(sin, TG_UNARY_SIN, false);
UNARY_OP(cos, TG_UNARY_COS, false);
UNARY_OP_F32_ON_CUDA(expm1, TG_UNARY_EXPM1, false);
UNARY_OP_F32_ON_CUDA(log1p, TG_UNARY_LOG1P, false);
UNARY_OP(floor, TG_UNARY_FLOOR, false);
UNARY_OP(ceil, TG_UNARY_CEIL, false);
UNARY_OP(round, TG_UNARY_ROUND, false);
UNARY_OP(trunc, TG_UNARY_TRUNC, false);
UNARY_OP(logsigmoid, TG_UNARY_LOGSIGMOID, false);
UNARY_OP(elu, TG_UNARY_ELU, false);
UNARY_OP(selu, TG_UNARY_ELU, false);
UNARY_OP(mish, TG_UNARY_MISH, false);
UNARY_OP(hardswish, TG_UNARY_HARDSWISH, false);
UNARY_OP(hardsigmoid, TG_UNARY_HARDSIGMOID, false);

static tg_tensor *apply_unary(const unary_op *op, tg_tensor *x, double a, double b) {
    scalar_args args = {a, b};
    return tg_apply_args(&op->fn, &x, &args, sizeof args);
}

tg_tensor *tg_neg(tg_tensor *x) { return apply_unary(&neg_op, x, 0, 0); }
tg_tensor *tg_exp(tg_tensor *x) { return apply_unary(&exp_op, x, 0, 0); }
tg_tensor *tg_log(tg_tensor *x) { return apply_unary(&log_op, x, 0, 0); }
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
                        tg_dtype_name(x->dtype), e), NULL;
    return apply_scalar(&pow_scalar_op, x, e, false);
}
tg_tensor *tg_sqrt(tg_tensor *x) { return apply_unary(&sqrt_op, x, 0, 0); }
tg_tensor *tg_rsqrt(tg_tensor *x) { return apply_unary(&rsqrt_op, x, 0, 0); }
tg_tensor *tg_abs(tg_tensor *x) { return apply_unary(&abs_op, x, 0, 0); }
tg_tensor *tg_sign(tg_tensor *x) { return apply_unary(&sign_op, x, 0, 0); }
tg_tensor *tg_relu(tg_tensor *x) { return apply_unary(&relu_op, x, 0, 0); }
tg_tensor *tg_leaky_relu(tg_tensor *x, double slope) { return apply_unary(&leaky_relu_op, x, slope, 0); }
tg_tensor *tg_sigmoid(tg_tensor *x) { return apply_unary(&sigmoid_op, x, 0, 0); }
tg_tensor *tg_tanh(tg_tensor *x) { return apply_unary(&tanh_op, x, 0, 0); }
tg_tensor *tg_gelu(tg_tensor *x) { return apply_unary(&gelu_op, x, 0, 0); }
tg_tensor *tg_gelu_tanh(tg_tensor *x) { return apply_unary(&gelu_tanh_op, x, 0, 0); }
tg_tensor *tg_silu(tg_tensor *x) { return apply_unary(&silu_op, x, 0, 0); }
tg_tensor *tg_erf(tg_tensor *x) { return apply_unary(&erf_op, x, 0, 0); }
tg_tensor *tg_reciprocal(tg_tensor *x) { return apply_unary(&reciprocal_op, x, 0, 0); }
tg_tensor *tg_square(tg_tensor *x) { return apply_unary(&square_op, x, 0, 0); }
tg_tensor *tg_sin(tg_tensor *x) { return apply_unary(&sin_op, x, 0, 0); }
tg_tensor *tg_expm1(tg_tensor *x) { return apply_unary(&expm1_op, x, 0, 0); }
tg_tensor *tg_log1p(tg_tensor *x) { return apply_unary(&log1p_op, x, 0, 0); }
tg_tensor *tg_floor(tg_tensor *x) { return apply_unary(&floor_op, x, 0, 0); }
tg_tensor *tg_ceil(tg_tensor *x) { return apply_unary(&ceil_op, x, 0, 0); }
tg_tensor *tg_round(tg_tensor *x) { return apply_unary(&round_op, x, 0, 0); }
tg_tensor *tg_trunc(tg_tensor *x) { return apply_unary(&trunc_op, x, 0, 0); }
tg_tensor *tg_logsigmoid(tg_tensor *x) { return apply_unary(&logsigmoid_op, x, 0, 0); }
tg_tensor *tg_elu(tg_tensor *x, double alpha) { return apply_unary(&elu_op, x, alpha, 1); }
tg_tensor *tg_selu(tg_tensor *x) {
    return apply_unary(&selu_op, x, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946);
}
tg_tensor *tg_mish(tg_tensor *x) { return apply_unary(&mish_op, x, 0, 0); }
tg_tensor *tg_hardswish(tg_tensor *x) { return apply_unary(&hardswish_op, x, 0, 0); }
tg_tensor *tg_hardsigmoid(tg_tensor *x) { return apply_unary(&hardsigmoid_op, x, 0, 0); }
tg_tensor *tg_cos(tg_tensor *x) { return apply_unary(&cos_op, x, 0, 0); }

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
    if (!x) return tg_error_null_input("tg_gt_mask", 0), NULL;
    return mask_of("tg_gt_mask", TG_UNARY_GT_SCALAR, x, a);
}

tg_tensor *tg_isfinite(tg_tensor *x) {
    if (!x) return tg_error_null_input("tg_isfinite", 0), NULL;
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
    if (!x) return tg_error_null_input("tg_all_finite", 0), false;
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
    if ((da.kind != db.kind || da.index != db.index) && tg_check_same_device(op, a, b, "all tensors"))
        return TG_ERROR;
    bool same_shape = a->shape.ndim == b->shape.ndim;
    for (int d = 0; same_shape && d < a->shape.ndim; d++) same_shape = a->shape.dims[d] == b->shape.dims[d];
    if (same_shape) {
        *out_shape = a->shape;
    } else if (!tg_broadcast_shapes(a->shape, b->shape, out_shape)) {
        char sa[128], sb[128];
        return tg_error("%s: shapes %s and %s cannot be broadcast together", op,
                        tg_shape_str(a->shape, sa, sizeof sa), tg_shape_str(b->shape, sb, sizeof sb));
    }
    *dtype = result_type(a, b);
    return TG_OK;
}

/* PyTorch's ZeroDivisionError for integer fmod / remainder: one count read on the host. */
static tg_status integer_zero_divisor(const char *op, tg_tensor *b) {
    tg_status status = TG_OK;
    TG_SCOPE {
        tg_tensor *zeros = tg_sum(tg_cast(tg_eq(b, tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = b->dtype,
                                                                                         .device = b->storage->device})),
                                          TG_INT64));
        tg_tensor *host = zeros ? tg_tensor_to(zeros, TG_CPU) : NULL;
        if (!host) status = TG_ERROR;
        else if (*(const int64_t *)tg_data_ptr(host) > 0)
            status = tg_error("%s: integer division by zero (ZeroDivisionError)", op);
    }
    return status;
}

static tg_tensor *binary_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const binary_op *op = (const binary_op *)tg_ctx_function(ctx);
    tg_tensor *a = in[0], *b = in[1];
    tg_shape shape;
    tg_dtype dtype;
    if (binary_prepare(op->fn.name, a, b, &shape, &dtype)) return NULL;
    if ((op->kind == TG_BINARY_DIV || op->kind == TG_BINARY_ATAN2) && !tg_dtype_is_floating(dtype))
        dtype = TG_FLOAT32;
    bool modulo = op->kind == TG_BINARY_FMOD || op->kind == TG_BINARY_REMAINDER;
    if (modulo && (dtype == TG_BOOL || dtype == TG_UINT8))
        return tg_error("%s: not implemented for %s (cast to int64 or a floating dtype first)", op->fn.name,
                        tg_dtype_name(dtype)), NULL;
    if (a->dtype != dtype) a = tg_cast(a, dtype);
    if (b->dtype != dtype) b = tg_cast(b, dtype);
    if (!a || !b) return NULL;
    if (modulo && !tg_dtype_is_floating(dtype) && integer_zero_divisor(op->fn.name, b)) return NULL;
    tg_dtype out_dtype = TG_BINARY_IS_COMPARISON(op->kind) ? TG_BOOL : dtype;
    tg_tensor *out = tg_empty(shape, (tg_opts){.dtype = out_dtype, .device = a->storage->device});
    if (!out || tg_binary_into(op->fn.name, op->kind, out, a, b)) return NULL;
    if (op->kind != TG_BINARY_ADD && op->kind != TG_BINARY_SUB && !TG_BINARY_IS_COMPARISON(op->kind)) {
        tg_ctx_save(ctx, in[0]);
        tg_ctx_save(ctx, in[1]);
    }
    return out;
}

static void binary_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    const binary_op *op = (const binary_op *)tg_ctx_function(ctx);
    tg_tensor *a = NULL, *b = NULL;
    if (op->kind != TG_BINARY_ADD && op->kind != TG_BINARY_SUB) {
        a = tg_ctx_saved(ctx, 0);
        b = tg_ctx_saved(ctx, 1);
        if (!a || !b) return;
    }
    bool need_a = tg_ctx_needs_input_grad(ctx, 0), need_b = tg_ctx_needs_input_grad(ctx, 1);
    switch (op->kind) {
    case TG_BINARY_ADD:
        grad_in[0] = g;
        grad_in[1] = g;
        break;
    case TG_BINARY_SUB:
        grad_in[0] = g;
        if (need_b) grad_in[1] = tg_neg(g);
        break;
    case TG_BINARY_MUL:
        if (need_a) grad_in[0] = tg_mul(g, b);
        if (need_b) grad_in[1] = tg_mul(g, a);
        break;
    case TG_BINARY_DIV: {
        tg_tensor *ga = tg_div(g, b);
        if (need_a) grad_in[0] = ga;
        if (need_b) grad_in[1] = tg_neg(tg_mul(ga, tg_div(a, b)));
        break;
    }
    case TG_BINARY_MAXIMUM:
    case TG_BINARY_MINIMUM: { /* PyTorch's where(a == b, g / 2, g).masked_fill_(a loses, 0): the
                                * winner takes the gradient, ties split it, a NaN passes it to both */
        tg_tensor *diff = op->kind == TG_BINARY_MAXIMUM ? tg_sub(a, b) : tg_sub(b, a);
        tg_tensor *loses_a = tg_gt_mask(tg_neg(diff), 0), *loses_b = tg_gt_mask(diff, 0);
        tg_tensor *half_tie = tg_mul_scalar(tg_cast(tg_eq(a, b), tg_dtype_of(diff)), 0.5);
        if (need_a) grad_in[0] = tg_mul(g, tg_rsub_scalar(tg_add(loses_a, half_tie), 1));
        if (need_b) grad_in[1] = tg_mul(g, tg_rsub_scalar(tg_add(loses_b, half_tie), 1));
        break;
    }
    case TG_BINARY_POW: { /* a^b: b a^(b-1), 0 where b == 0; a^b log(a), 0 where a == 0 and b >= 0 (PyTorch) */
        tg_tensor *zero = tg_zeros(TG_SCALAR_SHAPE, (tg_opts){.dtype = tg_dtype_of(g), .device = tg_device_of(g)});
        if (need_a) {
            tg_tensor *d = tg_mul(b, tg_pow(a, tg_sub_scalar(b, 1)));
            grad_in[0] = tg_mul(g, tg_where(tg_eq(b, zero), zero, d));
        }
        if (need_b) {
            tg_tensor *d = tg_mul(tg_pow(a, b), tg_log(a));
            grad_in[1] = tg_mul(g, tg_where(tg_eq(a, zero), tg_where(tg_ge(b, zero), zero, d), d));
        }
        break;
    }
    case TG_BINARY_ATAN2: { /* d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2) */
        tg_tensor *recip = tg_reciprocal(tg_add(tg_mul(a, a), tg_mul(b, b)));
        if (need_a) grad_in[0] = tg_mul(g, tg_mul(b, recip));
        if (need_b) grad_in[1] = tg_mul(g, tg_mul(tg_neg(a), recip));
        break;
    }
    case TG_BINARY_FMOD:      /* a - trunc(a / b) b: d/db = -trunc(a / b) */
    case TG_BINARY_REMAINDER: /* a - floor(a / b) b: d/db = -floor(a / b) (PyTorch's formulas) */
        if (need_a) grad_in[0] = g;
        if (need_b) {
            tg_tensor *q = tg_div(a, b);
            q = op->kind == TG_BINARY_FMOD ? tg_trunc(q) : tg_floor(q);
            grad_in[1] = tg_neg(tg_mul(g, q));
        }
        break;
    default: break;
    }
}

#define BINARY_OP_AUTOCAST(NAME, KIND, BACKWARD, AUTOCAST) \
    static const binary_op NAME##_op = {{#NAME, 2, binary_forward, BACKWARD, 0, TG_LOW_PRECISION_NATIVE, AUTOCAST}, KIND}
#define BINARY_OP(NAME, KIND, BACKWARD) BINARY_OP_AUTOCAST(NAME, KIND, BACKWARD, TG_AUTOCAST_NONE)
BINARY_OP(add, TG_BINARY_ADD, binary_backward);
BINARY_OP(sub, TG_BINARY_SUB, binary_backward);
BINARY_OP(mul, TG_BINARY_MUL, binary_backward);
BINARY_OP(div, TG_BINARY_DIV, binary_backward);
BINARY_OP(maximum, TG_BINARY_MAXIMUM, binary_backward);
BINARY_OP(minimum, TG_BINARY_MINIMUM, binary_backward);
BINARY_OP_AUTOCAST(pow, TG_BINARY_POW, binary_backward, TG_AUTOCAST_FLOAT32_ON_CUDA);
BINARY_OP(atan2, TG_BINARY_ATAN2, binary_backward);
BINARY_OP(fmod, TG_BINARY_FMOD, binary_backward);
BINARY_OP(remainder, TG_BINARY_REMAINDER, binary_backward);
BINARY_OP(eq, TG_BINARY_EQ, NULL);
BINARY_OP(ne, TG_BINARY_NE, NULL);
BINARY_OP(lt, TG_BINARY_LT, NULL);
BINARY_OP(le, TG_BINARY_LE, NULL);
BINARY_OP(gt, TG_BINARY_GT, NULL);
BINARY_OP(ge, TG_BINARY_GE, NULL);

#define BINARY_API(NAME) \
    tg_tensor *tg_##NAME(tg_tensor *a, tg_tensor *b) { return tg_apply(&NAME##_op.fn, (tg_tensor *[]){a, b}); }
BINARY_API(add)
BINARY_API(sub)
BINARY_API(mul)
BINARY_API(div)
BINARY_API(maximum)
BINARY_API(minimum)
BINARY_API(pow)
BINARY_API(atan2)
BINARY_API(fmod)
BINARY_API(remainder)
BINARY_API(eq)
BINARY_API(ne)
BINARY_API(lt)
BINARY_API(le)
BINARY_API(gt)
BINARY_API(ge)

/* ======================= where ======================= */

typedef struct {
    tg_tensor *cond; /* borrowed by the typed rows below */
} where_ctx;

#define WHERE_ROW(NAME, T)                                                                      \
    static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) {                       \
        for (int64_t i = 0; i < n; i++)                                                         \
            *(T *)(p[0] + i * s[0]) = *(const bool *)(p[1] + i * s[1]) ? *(const T *)(p[2] + i * s[2]) \
                                                                       : *(const T *)(p[3] + i * s[3]); \
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
                        tg_shape_str(b->shape, s3, sizeof s3)), NULL;
    tg_dtype dtype = tg_promote_types(a->dtype, b->dtype);
    if (a->dtype != dtype) a = tg_cast(a, dtype);
    if (b->dtype != dtype) b = tg_cast(b, dtype);
    tg_tensor *out = a && b ? tg_empty(shape, (tg_opts){.dtype = dtype, .device = a->storage->device}) : NULL;
    if (!out) return NULL;
    if (out->storage->device.kind == TG_DEVICE_CUDA) {
        if (TG_CUDA_CALL("tg_where", tg_cuda_where, out, cond, a, b)) return NULL;
    } else {
        size_t es = tg_dtype_size(dtype);
        tg_iter it;
        tg_tensor *ops[4] = {out, cond, a, b};
        tg_iter_init(&it, &shape, 4, ops);
        tg_iter_run(&it, es == 1 ? where_row_1 : es == 2 ? where_row_2 : es == 4 ? where_row_4 : where_row_8, NULL,
                    true);
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

static const tg_function where_fn = {"where", 3, where_forward, where_backward, 0, TG_LOW_PRECISION_NATIVE, TG_AUTOCAST_NONE};

tg_tensor *tg_where(tg_tensor *cond, tg_tensor *a, tg_tensor *b) {
    return tg_apply(&where_fn, (tg_tensor *[]){cond, a, b});
}

/* ======================= cast ======================= */

static tg_tensor *cast_forward(tg_ctx *ctx, tg_tensor *const *in) {
    const tg_dtype *dtype = tg_ctx_attrs(ctx);
    if (!tg_dtype_is_supported(*dtype))
        return tg_error("tg_cast: dtype %d is not a tg_dtype", (int)*dtype), NULL;
    tg_tensor *out = tg_empty(in[0]->shape, (tg_opts){.dtype = *dtype, .device = in[0]->storage->device});
    if (!out || tg_copy_values_(out, in[0])) return NULL;
    return out;
}

static void cast_backward(tg_ctx *ctx, tg_tensor *g, tg_tensor **grad_in) {
    grad_in[0] = tg_cast(g, tg_ctx_input_dtype(ctx, 0));
}

static const tg_function cast_fn = {"cast", 1, cast_forward, cast_backward, 0, TG_LOW_PRECISION_NATIVE, TG_AUTOCAST_NONE};

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
    if (!a) return tg_error_null_input(op, 0);
    if (!b) return tg_error_null_input(op, 1);
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
