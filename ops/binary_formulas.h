/* Every binary op but pow, one row each: the one definition both devices compile, as
 * ops/unary_formulas.h is for the unary ops. The tables are by the dtypes they serve.
 * An arithmetic row is X(KIND, name, formula, saves, grad_a, grad_b):
 * - KIND: the kind's name after TG_BINARY_ (ops/elementwise_kinds.h generates the enum
 *   from the tables, comparisons last);
 * - name: the op's name, tg_<name>(a, b) its public function (generated);
 * - formula: z in terms of x and y of type scalar_t (the floating rows use TG_ATAN2
 *   and TG_FMOD, which each backend defines for float and double);
 * - saves: AB when the gradients read the inputs, NONE when they do not;
 * - grad_a, grad_b: the inputs' gradients as ops on g (the output's gradient) and the
 *   saved a and b (the broadcast back to each input's shape is the engine's); each is
 *   evaluated only when that input needs a gradient.
 * A comparison row is X(KIND, name, formula): bool, no gradient. The integer table
 * holds integer formulas of kinds that have a floating row. pow has no row (its op,
 * with its own autocast and gradient, is in ops/elementwise.c); its formula is TG_POW for
 * float and double and TG_BINARY_INT_POW below for the integer and bool dtypes, on both
 * devices (core/typed_libm.h). */
#ifndef TG_OPS_BINARY_FORMULAS_H
#define TG_OPS_BINARY_FORMULAS_H

#include "core/host_device.h"
#include "core/typed_libm.h"
#include "ops/unary_formulas.h" /* TG_SQRT1_2, TG_SQRT2_PI, TG_INV_SQRT_2PI */

/* Every dtype (bool follows C's arithmetic: true + true is true). */
/* clang-format off */
#define TG_BINARY_FORMULAS(X)                                                                \
    X(ADD, add, x + y, NONE,                                                                 \
      g,                                                                                     \
      g)                                                                                     \
    X(SUB, sub, x - y, NONE,                                                                 \
      g,                                                                                     \
      tg_neg(g))                                                                             \
    X(MUL, mul, x * y, AB,                                                                   \
      tg_mul(g, b),                                                                          \
      tg_mul(g, a))                                                                          \
    X(DIV, div, x / y, AB,                                                                   \
      tg_div(g, b),                                                                          \
      tg_neg(tg_mul(tg_div(g, b), tg_div(a, b))))                                            \
    X(MAXIMUM, maximum, (x != x || x > y) ? x : y, AB, /* NaN propagates */                  \
      extremum_grad(g, a, b, true, 0),                                                       \
      extremum_grad(g, a, b, true, 1))                                                       \
    X(MINIMUM, minimum, (x != x || x < y) ? x : y, AB,                                       \
      extremum_grad(g, a, b, false, 0),                                                      \
      extremum_grad(g, a, b, false, 1))
/* clang-format on */

/* Comparisons: bool results for every dtype. */
/* clang-format off */
#define TG_BINARY_COMPARE_FORMULAS(X)                                                        \
    X(EQ, eq, x == y)                                                                        \
    X(NE, ne, x != y)                                                                        \
    X(LT, lt, x < y)                                                                         \
    X(LE, le, x <= y)                                                                        \
    X(GT, gt, x > y)                                                                         \
    X(GE, ge, x >= y)
/* clang-format on */

/* PyTorch's remainder from the truncated one, m = fmod(x, y) or x % y: m + y when m is
 * non-zero and its sign differs from y's, so the result takes the divisor's sign. */
#define TG_REMAINDER_OF(m, y) ((m) != 0 && (((m) < 0) != ((y) < 0)) ? (m) + (y) : (m))

/* float32 and float64 only (integer inputs of atan2 are promoted to float32 first). */
/* clang-format off */
#define TG_BINARY_FLOAT_FORMULAS(X)                                                          \
    X(ATAN2, atan2, TG_ATAN2(x, y), AB, /* b / (a^2 + b^2), -a / (a^2 + b^2) */              \
      tg_mul(g, tg_mul(b, tg_reciprocal(tg_add(tg_mul(a, a), tg_mul(b, b))))),               \
      tg_mul(g, tg_mul(tg_neg(a), tg_reciprocal(tg_add(tg_mul(a, a), tg_mul(b, b))))))       \
    X(FMOD, fmod, TG_FMOD(x, y), AB, /* a - trunc(a / b) b */                                \
      g,                                                                                     \
      tg_neg(tg_mul(g, tg_trunc(tg_div(a, b)))))                                             \
    X(REMAINDER, remainder, TG_REMAINDER_OF(TG_FMOD(x, y), y), AB, /* a - floor(a / b) b */  \
      g,                                                                                     \
      tg_neg(tg_mul(g, tg_floor(tg_div(a, b)))))                                             \
    X(RELU_BACKWARD, relu_backward, y <= 0 ? (scalar_t)0 : x, AB, /* aten threshold_backward */ \
      tg_relu_backward(g, b), /* the same mask; NaN in b passes g, as in relu's forward */   \
      tg_zeros_like(b))                                                                      \
    X(GELU_BACKWARD, gelu_backward, x * TG_GELU_DERIVATIVE(y), AB, /* aten gelu_backward */  \
      tg_gelu_backward(g, b),                                                                \
      tg_mul(tg_mul(g, a), gelu_second_derivative(b)))                                       \
    X(GELU_TANH_BACKWARD, gelu_tanh_backward, x * TG_GELU_TANH_DERIVATIVE(y), AB,            \
      tg_gelu_tanh_backward(g, b),                                                           \
      tg_mul(tg_mul(g, a), gelu_tanh_second_derivative(b)))
/* clang-format on */

/* GELU's derivatives at v, for the one-pass backward rows above (ten passes of composed ops
 * before): exact, Phi(v) + v phi(v); tanh approximation, with t = tanh(k (v + c v^3)),
 * 0.5 (1 + t) + 0.5 v (1 - t^2) k (1 + 3 c v^2). For float and double (C picks by _Generic,
 * nvcc by overloading; a C++ host file that includes this table for its kinds gets neither). */
#if defined(__CUDACC__) || !defined(__cplusplus)
#define TG_GELU_DERIVATIVES(T, S)                                                                              \
    TG_HD_INLINE T tg_gelu_derivative_##S(T v) {                                                               \
        return (T)0.5 * ((T)1 + TG_ERF(v * (T)TG_SQRT1_2)) + v * (T)TG_INV_SQRT_2PI * TG_EXP((T)-0.5 * v * v); \
    }                                                                                                          \
    TG_HD_INLINE T tg_gelu_tanh_derivative_##S(T v) {                                                          \
        T k = (T)TG_SQRT2_PI, c = (T)0.044715, t = TG_TANH(k * (v + c * v * v * v));                           \
        return (T)0.5 * ((T)1 + t) + (T)0.5 * v * ((T)1 - t * t) * k * ((T)1 + (T)3 * c * v * v);              \
    }
TG_GELU_DERIVATIVES(float, f32)
TG_GELU_DERIVATIVES(double, f64)
#undef TG_GELU_DERIVATIVES
#ifdef __CUDACC__
TG_HD_INLINE float TG_GELU_DERIVATIVE(float v) { return tg_gelu_derivative_f32(v); }
TG_HD_INLINE double TG_GELU_DERIVATIVE(double v) { return tg_gelu_derivative_f64(v); }
TG_HD_INLINE float TG_GELU_TANH_DERIVATIVE(float v) { return tg_gelu_tanh_derivative_f32(v); }
TG_HD_INLINE double TG_GELU_TANH_DERIVATIVE(double v) { return tg_gelu_tanh_derivative_f64(v); }
#else
#define TG_GELU_DERIVATIVE(v) _Generic((v), float : tg_gelu_derivative_f32, default : tg_gelu_derivative_f64)(v)
#define TG_GELU_TANH_DERIVATIVE(v) \
    _Generic((v), float : tg_gelu_tanh_derivative_f32, default : tg_gelu_tanh_derivative_f64)(v)
#endif
#endif

/* pow of integers (and bools), as int64 then cast to the element type: x^y in double,
 * rounded to the integer it is (core/typed_libm.h's tg_int_pow). */
#define TG_BINARY_INT_POW(x, y) ((int64_t)tg_int_pow((double)(x), (double)(y)))

/* int64 and int32. A zero divisor is refused on the host (PyTorch's ZeroDivisionError);
 * the guard keeps a kernel that meets one anyway, or INT_MIN % -1, from trapping
 * (anything modulo -1 is 0). */
#define TG_INT_DIVISOR_OK(y) ((y) != 0 && (y) != (scalar_t)-1)
/* clang-format off */
#define TG_BINARY_INT_FORMULAS(X)                                                              \
    X(FMOD, TG_INT_DIVISOR_OK(y) ? (scalar_t)(x % y) : (scalar_t)0)                            \
    X(REMAINDER, TG_INT_DIVISOR_OK(y) ? (scalar_t)TG_REMAINDER_OF((scalar_t)(x % y), y) : (scalar_t)0)
/* clang-format on */

#endif
