/* The formula of every floating unary kind: the one definition both devices compile.
 * ops/elementwise.c expands TG_UNARY_FLOAT_FORMULAS into its CPU loops and
 * ops/cuda/elementwise.cu into its device switch, so the CPU tests check the very
 * expression the GPU runs. Each row is X(KIND, expression): the kind's name after
 * TG_UNARY_, and y in terms of x, a and b, all of type scalar_t, with the math
 * functions TG_EXP, TG_LOG, ... that each backend defines for float and double
 * (libm's f / plain functions). The kinds' enum (ops/elementwise_kinds.h) is
 * generated from these rows. Adding a kind: a row here, its derivative in
 * unary_backward (ops/elementwise.c) and its public function; both devices then
 * compute it. A kind that integers have also gets a row in TG_UNARY_INT_FORMULAS. */
#ifndef TG_OPS_UNARY_FORMULAS_H
#define TG_OPS_UNARY_FORMULAS_H

#define TG_SQRT1_2 0.70710678118654752440  /* 1/sqrt(2) */
#define TG_SQRT2_PI 0.79788456080286535588 /* sqrt(2/pi) */
/* torch.clamp is min(max(x, lo), hi) (so lo > hi gives hi); a NaN bound is no bound. */
#define TG_CLAMP_LO(x, lo) ((lo) == (lo) && (x) < (lo) ? (lo) : (x))
#define TG_CLAMP_HI(y, hi) ((hi) == (hi) && (scalar_t)(y) > (hi) ? (hi) : (scalar_t)(y))

/* std::max / std::min's comparisons, which PyTorch's scalar kernels use (a NaN first
 * argument comes back). */
#define TG_STD_MAX(p, q) ((p) < (q) ? (q) : (p))
#define TG_STD_MIN(p, q) ((q) < (p) ? (q) : (p))

#define TG_UNARY_FLOAT_FORMULAS(X)                                                                           \
    X(NEG, -x)                                                                                               \
    X(EXP, TG_EXP(x))                                                                                        \
    X(LOG, TG_LOG(x))                                                                                        \
    X(ADD_SCALAR, x + a)                                                                                     \
    X(MUL_SCALAR, x * a)                                                                                     \
    X(RSUB_SCALAR, a - x)                                                                                    \
    X(DIV_SCALAR, x / a) /* floating only */                                                                 \
    X(POW_SCALAR, a == 2 ? x * x : TG_POW(x, a))                                                             \
    X(SQRT, TG_SQRT(x))                                                                                      \
    X(RSQRT, (scalar_t)1 / TG_SQRT(x))                                                                       \
    X(ABS, TG_FABS(x))                                                                                       \
    X(SIGN, (scalar_t)((x > 0) - (x < 0)))                                                                   \
    X(RELU, x > 0 ? x : (x != x ? x : (scalar_t)0))                                                          \
    X(LEAKY_RELU, x > 0 ? x : x * a)                                                                         \
    X(SIGMOID, (scalar_t)1 / ((scalar_t)1 + TG_EXP(-x)))                                                     \
    X(TANH, TG_TANH(x))                                                                                      \
    X(GELU, (scalar_t)0.5 * x * ((scalar_t)1 + TG_ERF(x * (scalar_t)TG_SQRT1_2)))                            \
    X(GELU_TANH,                                                                                             \
      (scalar_t)0.5 * x * ((scalar_t)1 + TG_TANH((scalar_t)TG_SQRT2_PI * (x + (scalar_t)0.044715 * x * x * x)))) \
    X(SILU, x / ((scalar_t)1 + TG_EXP(-x)))                                                                  \
    X(SOFTPLUS, x * a > b ? x : TG_LOG1P(TG_EXP(x * a)) / a) /* beta a, threshold b */                      \
    X(CLAMP, x != x ? x : TG_CLAMP_HI(TG_CLAMP_LO(x, a), b))                                                 \
    X(ERF, TG_ERF(x))                                                                                        \
    X(RECIPROCAL, (scalar_t)1 / x)                                                                           \
    X(SQUARE, x * x)                                                                                         \
    X(SIN, TG_SIN(x))                                                                                        \
    X(COS, TG_COS(x))                                                                                        \
    X(GT_SCALAR, (scalar_t)(x > a)) /* 0/1 in x's dtype: masks of backward formulas */                      \
    X(NOT_LE_SCALAR, (scalar_t)!(x <= a)) /* relu's mask: 1 at NaN, as PyTorch's */                          \
    X(ISFINITE, (scalar_t)(x - x == (scalar_t)0)) /* NaN and Inf give NaN */                                 \
    X(EXPM1, TG_EXPM1(x))                                                                                    \
    X(LOG1P, TG_LOG1P(x))                                                                                    \
    X(FLOOR, TG_FLOOR(x))                                                                                    \
    X(CEIL, TG_CEIL(x))                                                                                      \
    X(ROUND, TG_NEARBYINT(x)) /* half to even, as torch.round */                                            \
    X(TRUNC, TG_TRUNC(x))                                                                                    \
    X(LOGSIGMOID, (x < 0 ? x : (scalar_t)0) - TG_LOG1P(TG_EXP(-TG_FABS(x))))                                  \
    X(ELU, x <= 0 ? (TG_EXP(x) - (scalar_t)1) * (a * b) : x * b) /* alpha a, scale b; exp - 1 as 1.13 */     \
    X(MISH, x * TG_TANH(TG_LOG1P(TG_EXP(x))))                                                                \
    X(HARDSWISH, x * TG_STD_MIN(TG_STD_MAX(x + (scalar_t)3, (scalar_t)0), (scalar_t)6) / (scalar_t)6)       \
    X(HARDSIGMOID, TG_STD_MIN(TG_STD_MAX(x + (scalar_t)3, (scalar_t)0), (scalar_t)6) / (scalar_t)6)

/* The kinds int32 and int64 tensors have, and their formulas in the integer type
 * scalar_t: x, a and b (the parameters converted to scalar_t), pa and pb (the
 * parameters as doubles: a NaN clamp bound is no bound), TG_IPOW(x, e) each backend's
 * power of doubles whose result is cast back (CUDA's pow is rounded to an integer
 * there). Expanded by ops/elementwise.c's INT_UNARY_ROW, ops/cuda/elementwise.cu's
 * unary_int and tg_unary_int_kind_ok (the kinds refused for integers). */
#define TG_UNARY_INT_FORMULAS(X)                                                                 \
    X(NEG, -x)                                                                                   \
    X(ADD_SCALAR, x + a)                                                                         \
    X(MUL_SCALAR, x * a)                                                                         \
    X(RSUB_SCALAR, a - x)                                                                        \
    X(ABS, x < 0 ? -x : x)                                                                       \
    X(SIGN, (scalar_t)((x > 0) - (x < 0)))                                                       \
    X(RELU, x > 0 ? x : (scalar_t)0)                                                             \
    X(SQUARE, x * x)                                                                             \
    X(POW_SCALAR, (scalar_t)TG_IPOW((double)x, (double)a))                                       \
    X(CLAMP, (pb == pb && ((pa == pa && x < a) ? a : x) > b) ? b : (pa == pa && x < a) ? a : x)

#endif
