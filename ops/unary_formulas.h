/* Every floating unary op, one row each: the one definition both devices compile.
 * A row is X(KIND, name, api, saves, autocast, formula, gradient):
 * - KIND: the kind's name after TG_UNARY_ (ops/elementwise_kinds.h generates the enum);
 * - name: the op's name, tg_<name> for its public function;
 * - api: PLAIN generates `tg_tensor *tg_<name>(tg_tensor *x)`; OWN: the function takes
 *   scalar parameters and is written in ops/elementwise.c; NONE: an internal kind (the
 *   masks of backward formulas), no op;
 * - saves: x, or y (the output) where the gradient is cheapest from it;
 * - autocast: NONE, or FLOAT32_ON_CUDA (PyTorch's CUDA autocast float32 list);
 * - formula: y in terms of x, a and b, all of type scalar_t, with the math functions
 *   TG_EXP, TG_LOG, ... (core/typed_libm.h: float and double, on both devices);
 * - gradient: the input's gradient as ops on g (the output's gradient), v (the saved
 *   x or y), a and b (doubles); ops, so it runs on any device and differentiates again.
 * ops/elementwise.c expands the rows into its CPU loops, the saves, the gradients, the
 * tg_function structs and the PLAIN public functions; ops/cuda/elementwise.cu expands
 * the formula column into its device switch, so the CPU tests check the very
 * expression the GPU runs. A kind that integers have also gets a row in
 * TG_UNARY_INT_FORMULAS (an integer formula). The rows stand in five groups of at most
 * nine, so that no macro is a screenful; TG_UNARY_FLOAT_FORMULAS joins them (the order
 * is the enum's and nothing else). docs/design.md: adding an op. */
#ifndef TG_OPS_UNARY_FORMULAS_H
#define TG_OPS_UNARY_FORMULAS_H

#define TG_SQRT1_2 0.70710678118654752440      /* 1/sqrt(2) */
#define TG_SQRT2_PI 0.79788456080286535588     /* sqrt(2/pi) */
#define TG_INV_SQRT_2PI 0.39894228040143267794 /* 1/sqrt(2 pi) */
/* torch.clamp is min(max(x, lo), hi) (so lo > hi gives hi); a NaN bound is no bound. */
#define TG_CLAMP_LO(x, lo) ((lo) == (lo) && (x) < (lo) ? (lo) : (x))
#define TG_CLAMP_HI(y, hi) ((hi) == (hi) && (scalar_t)(y) > (hi) ? (hi) : (scalar_t)(y))

/* std::max / std::min's comparisons, which PyTorch's scalar kernels use (a NaN first
 * argument comes back). */
#define TG_STD_MAX(p, q) ((p) < (q) ? (q) : (p))
#define TG_STD_MIN(p, q) ((q) < (p) ? (q) : (p))

/* Negation and arithmetic with a scalar */
/* clang-format off */
#define TG_UNARY_ARITHMETIC_FORMULAS(X)                                                                               \
    X(NEG, neg, PLAIN, x, NONE,                                                                                       \
      -x,                                                                                                             \
      tg_neg(g))                                                                                                      \
    X(ADD_SCALAR, add_scalar, OWN, x, NONE,                                                                           \
      x + a,                                                                                                          \
      g)                                                                                                              \
    X(MUL_SCALAR, mul_scalar, OWN, x, NONE,                                                                           \
      x * a,                                                                                                          \
      tg_mul_scalar(g, a))                                                                                            \
    X(RSUB_SCALAR, rsub_scalar, OWN, x, NONE,                                                                         \
      a - x,                                                                                                          \
      tg_neg(g))                                                                                                      \
    X(DIV_SCALAR, div_scalar, OWN, x, NONE, /* floating only */                                                       \
      x / a,                                                                                                          \
      tg_div_scalar(g, a))                                                                                            \
    X(RECIPROCAL, reciprocal, PLAIN, y, FLOAT32_ON_CUDA,                                                              \
      (scalar_t)1 / x,                                                                                                \
      tg_mul(g, tg_neg(tg_mul(v, v))))                                                                                \
    X(SQUARE, square, PLAIN, x, NONE,                                                                                 \
      x * x,                                                                                                          \
      tg_mul(g, tg_mul_scalar(v, 2)))                                                                                 \
    X(ABS, abs, PLAIN, x, NONE,                                                                                       \
      TG_FABS(x),                                                                                                     \
      tg_mul(g, tg_sign(v)))                                                                                          \
    X(SIGN, sign, PLAIN, x, NONE,                                                                                     \
      (scalar_t)((x > 0) - (x < 0)),                                                                                  \
      tg_mul(g, tg_zeros_like(v)))
/* clang-format on */

/* Exponentials, logarithms, powers and erf */
/* clang-format off */
#define TG_UNARY_EXP_LOG_POW_FORMULAS(X)                                                                              \
    X(EXP, exp, PLAIN, y, FLOAT32_ON_CUDA,                                                                            \
      TG_EXP(x),                                                                                                      \
      tg_mul(g, v))                                                                                                   \
    X(LOG, log, PLAIN, x, FLOAT32_ON_CUDA,                                                                            \
      TG_LOG(x),                                                                                                      \
      tg_div(g, v))                                                                                                   \
    X(EXPM1, expm1, PLAIN, x, FLOAT32_ON_CUDA,                                                                        \
      TG_EXPM1(x),                                                                                                    \
      tg_mul(g, tg_exp(v)))                                                                                           \
    X(LOG1P, log1p, PLAIN, x, FLOAT32_ON_CUDA,                                                                        \
      TG_LOG1P(x),                                                                                                    \
      tg_div(g, tg_add_scalar(v, 1)))                                                                                 \
    X(POW_SCALAR, pow_scalar, OWN, x, FLOAT32_ON_CUDA,                                                                \
      a == 2 ? x * x : TG_POW(x, a),                                                                                  \
      tg_mul(g, a == 0 ? tg_zeros_like(v) : tg_mul_scalar(tg_pow_scalar(v, a - 1), a)))                               \
    X(SQRT, sqrt, PLAIN, y, NONE,                                                                                     \
      TG_SQRT(x),                                                                                                     \
      tg_div(g, tg_mul_scalar(v, 2)))                                                                                 \
    X(RSQRT, rsqrt, PLAIN, y, FLOAT32_ON_CUDA,                                                                        \
      (scalar_t)1 / TG_SQRT(x),                                                                                       \
      tg_mul(g, tg_mul_scalar(tg_pow_scalar(v, 3), -0.5)))                                                            \
    X(ERF, erf, PLAIN, x, NONE, /* 2/sqrt(pi) e^-x^2 */                                                               \
      TG_ERF(x),                                                                                                      \
      tg_mul(g, tg_mul_scalar(tg_exp(tg_neg(tg_mul(v, v))), 1.12837916709551257390)))
/* clang-format on */

/* ReLU of x in type T, NaN passing (as PyTorch's): the RELU row below and batch norm's
 * fused ReLU (ops/cpu/norm_kernels.h). */
#define TG_RELU_OF(x, T) ((x) > 0 ? (x) : ((x) != (x) ? (x) : (T)0))

/* Activations */
/* clang-format off */
#define TG_UNARY_ACTIVATION_FORMULAS(X)                                                                               \
    X(RELU, relu, PLAIN, x, NONE, /* NaN passes, as PyTorch's threshold_backward */                                   \
      TG_RELU_OF(x, scalar_t),                                                                                        \
      tg_relu_backward(g, v)) /* one pass: g where v > 0 or NaN, else 0 */                                            \
    X(LEAKY_RELU, leaky_relu, OWN, x, NONE,                                                                           \
      x > 0 ? x : x * a,                                                                                              \
      tg_mul(g, tg_add_scalar(tg_mul_scalar(tg_gt_mask(v, 0), 1 - a), a)))                                            \
    X(SIGMOID, sigmoid, PLAIN, y, NONE,                                                                               \
      (scalar_t)1 / ((scalar_t)1 + TG_EXP(-x)),                                                                       \
      tg_mul(g, tg_mul(v, tg_rsub_scalar(v, 1))))                                                                     \
    X(TANH, tanh, PLAIN, y, NONE,                                                                                     \
      TG_TANH(x),                                                                                                     \
      tg_mul(g, tg_rsub_scalar(tg_mul(v, v), 1)))                                                                     \
    X(GELU, gelu, PLAIN, x, NONE,                                                                                     \
      (scalar_t)0.5 * x * ((scalar_t)1 + TG_ERF(x * (scalar_t)TG_SQRT1_2)),                                           \
      tg_gelu_backward(g, v)) /* one pass: ops/binary_formulas.h */                                                                                  \
    X(GELU_TANH, gelu_tanh, PLAIN, x, NONE,                                                                           \
      (scalar_t)0.5 * x * ((scalar_t)1 + TG_TANH((scalar_t)TG_SQRT2_PI * (x + (scalar_t)0.044715 * x * x * x))),      \
      tg_gelu_tanh_backward(g, v))                                                                             \
    X(SILU, silu, PLAIN, x, NONE,                                                                                     \
      x / ((scalar_t)1 + TG_EXP(-x)),                                                                                 \
      tg_mul(g, silu_derivative(v)))                                                                                  \
    X(SOFTPLUS, softplus, OWN, x, FLOAT32_ON_CUDA, /* beta a, threshold b */                                          \
      x * a > b ? x : TG_LOG1P(TG_EXP(x * a)) / a,                                                                    \
      tg_mul(g, softplus_derivative(v, a, b)))
/* clang-format on */

/* More activations and clamp */
/* clang-format off */
#define TG_UNARY_ACTIVATION_MORE_FORMULAS(X)                                                                          \
    X(LOGSIGMOID, logsigmoid, PLAIN, x, NONE,                                                                         \
      (x < 0 ? x : (scalar_t)0) - TG_LOG1P(TG_EXP(-TG_FABS(x))),                                                      \
      tg_mul(g, tg_sigmoid(tg_neg(v))))                                                                               \
    X(ELU, elu, OWN, x, NONE, /* alpha a, scale b; exp - 1 as 1.13 */                                                 \
      x <= 0 ? (TG_EXP(x) - (scalar_t)1) * (a * b) : x * b,                                                           \
      tg_mul(g, elu_derivative(v, a, b)))                                                                             \
    X(MISH, mish, PLAIN, x, NONE,                                                                                     \
      x * TG_TANH(TG_LOG1P(TG_EXP(x))),                                                                               \
      tg_mul(g, mish_derivative(v)))                                                                                  \
    X(HARDSWISH, hardswish, PLAIN, x, NONE,                                                                           \
      x * TG_STD_MIN(TG_STD_MAX(x + (scalar_t)3, (scalar_t)0), (scalar_t)6) / (scalar_t)6,                            \
      tg_mul(g, hardswish_derivative(v)))                                                                             \
    X(HARDSIGMOID, hardsigmoid, PLAIN, x, NONE, /* 1/6 inside (-3, 3), rounded to float32 as PyTorch's */             \
      TG_STD_MIN(TG_STD_MAX(x + (scalar_t)3, (scalar_t)0), (scalar_t)6) / (scalar_t)6,                                \
      tg_mul(g, tg_mul_scalar(tg_mul(tg_gt_mask(v, -3), tg_gt_mask(tg_neg(v), -3)), (double)(1.0f / 6.0f))))          \
    X(SOFTSIGN, softsign, PLAIN, x, NONE,                                                                             \
      x / ((scalar_t)1 + TG_FABS(x)),                                                                                 \
      tg_div(g, tg_square(tg_add_scalar(tg_abs(v), 1))))                                                              \
    X(CLAMP, clamp, OWN, x, NONE,                                                                                     \
      x != x ? x : TG_CLAMP_HI(TG_CLAMP_LO(x, a), b),                                                                 \
      tg_mul(g, clamp_derivative(v, a, b)))
/* clang-format on */

/* Trigonometry, rounding and the masks of backward formulas */
/* clang-format off */
#define TG_UNARY_TRIG_ROUND_MASK_FORMULAS(X)                                                                          \
    X(SIN, sin, PLAIN, x, NONE,                                                                                       \
      TG_SIN(x),                                                                                                      \
      tg_mul(g, tg_cos(v)))                                                                                           \
    X(COS, cos, PLAIN, x, NONE,                                                                                       \
      TG_COS(x),                                                                                                      \
      tg_mul(g, tg_neg(tg_sin(v))))                                                                                   \
    X(FLOOR, floor, PLAIN, x, NONE,                                                                                   \
      TG_FLOOR(x),                                                                                                    \
      tg_mul(g, tg_zeros_like(v)))                                                                                    \
    X(CEIL, ceil, PLAIN, x, NONE,                                                                                     \
      TG_CEIL(x),                                                                                                     \
      tg_mul(g, tg_zeros_like(v)))                                                                                    \
    X(ROUND, round, PLAIN, x, NONE, /* half to even, as torch.round */                                                \
      TG_NEARBYINT(x),                                                                                                \
      tg_mul(g, tg_zeros_like(v)))                                                                                    \
    X(TRUNC, trunc, PLAIN, x, NONE,                                                                                   \
      TG_TRUNC(x),                                                                                                    \
      tg_mul(g, tg_zeros_like(v)))                                                                                    \
    X(GT_SCALAR, gt_scalar, NONE, x, NONE, /* 0/1 in x's dtype: masks of backward formulas */                         \
      (scalar_t)(x > a),                                                                                              \
      NULL)                                                                                                           \
    X(ISFINITE, isfinite, NONE, x, NONE, /* NaN and Inf give NaN */                                                   \
      (scalar_t)(x - x == (scalar_t)0),                                                                               \
      NULL)
/* clang-format on */

/* clang-format off */
#define TG_UNARY_FLOAT_FORMULAS(X) \
    TG_UNARY_ARITHMETIC_FORMULAS(X) TG_UNARY_EXP_LOG_POW_FORMULAS(X) TG_UNARY_ACTIVATION_FORMULAS(X) \
    TG_UNARY_ACTIVATION_MORE_FORMULAS(X) TG_UNARY_TRIG_ROUND_MASK_FORMULAS(X)
/* clang-format on */

/* The kinds int32 and int64 tensors have, and their formulas in the integer type
 * scalar_t: x, a and b (the parameters converted to scalar_t), pa and pb (the
 * parameters as doubles: a NaN clamp bound is no bound); powers through tg_int_pow
 * (core/typed_libm.h: x^e in double rounded to the integer it is), cast back.
 * Expanded by ops/elementwise.c's INT_UNARY_ROW, ops/cuda/elementwise.cu's
 * unary_int and tg_unary_int_kind_ok (the kinds refused for integers). */
/* clang-format off */
#define TG_UNARY_INT_FORMULAS(X)                                                                 \
    X(NEG, -x)                                                                                   \
    X(ADD_SCALAR, x + a)                                                                         \
    X(MUL_SCALAR, x * a)                                                                         \
    X(RSUB_SCALAR, a - x)                                                                        \
    X(ABS, x < 0 ? -x : x)                                                                       \
    X(SIGN, (scalar_t)((x > 0) - (x < 0)))                                                       \
    X(RELU, x > 0 ? x : (scalar_t)0)                                                             \
    X(SQUARE, x * x)                                                                             \
    X(POW_SCALAR, (scalar_t)tg_int_pow((double)x, (double)a))                                    \
    X(CLAMP, (pb == pb && ((pa == pa && x < a) ? a : x) > b) ? b : (pa == pa && x < a) ? a : x)
/* clang-format on */

#endif
