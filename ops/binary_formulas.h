/* The formula of every binary kind but pow: the one definition both devices compile.
 * ops/elementwise.c expands these rows into its CPU loops and
 * ops/cuda/elementwise.cu into its device switch (binary_arith / binary_compare),
 * as ops/unary_formulas.h does for the unary kinds. Each row is X(KIND, expression):
 * the kind's name after TG_BINARY_, and z in terms of x and y of type scalar_t. The
 * floating rows use TG_ATAN2 and TG_FMOD, which each backend defines for float and
 * double. pow keeps one spelling per backend (glibc's exact pow on the host, a
 * rounded one for integers on the device: ops/cuda/elementwise.cu's int_pow).
 * Adding a kind: a row in the right table, its enum entry in ops/elementwise_kinds.h
 * (before TG_BINARY_EQ unless it is a comparison), its gradient in binary_backward
 * (ops/elementwise.c) and its public function. */
#ifndef TG_OPS_BINARY_FORMULAS_H
#define TG_OPS_BINARY_FORMULAS_H

/* Every dtype (bool follows C's arithmetic: true + true is true). */
#define TG_BINARY_FORMULAS(X)                                                                  \
    X(ADD, x + y)                                                                              \
    X(SUB, x - y)                                                                              \
    X(MUL, x * y)                                                                              \
    X(DIV, x / y)                                                                              \
    X(MAXIMUM, (x != x || x > y) ? x : y) /* NaN propagates */                                 \
    X(MINIMUM, (x != x || x < y) ? x : y)

/* Comparisons: bool results for every dtype. */
#define TG_BINARY_COMPARE_FORMULAS(X)                                                          \
    X(EQ, x == y)                                                                              \
    X(NE, x != y)                                                                              \
    X(LT, x < y)                                                                               \
    X(LE, x <= y)                                                                              \
    X(GT, x > y)                                                                               \
    X(GE, x >= y)

/* PyTorch's remainder from the truncated one, m = fmod(x, y) or x % y: m + y when m is
 * non-zero and its sign differs from y's, so the result takes the divisor's sign. */
#define TG_REMAINDER_OF(m, y) ((m) != 0 && (((m) < 0) != ((y) < 0)) ? (m) + (y) : (m))

/* float32 and float64 only (integer inputs of atan2 are promoted to float32 first). */
#define TG_BINARY_FLOAT_FORMULAS(X)                                                            \
    X(ATAN2, TG_ATAN2(x, y))                                                                   \
    X(FMOD, TG_FMOD(x, y))                                                                     \
    X(REMAINDER, TG_REMAINDER_OF(TG_FMOD(x, y), y))

/* int64 and int32. A zero divisor is refused on the host (PyTorch's ZeroDivisionError);
 * the guard keeps a kernel that meets one anyway, or INT_MIN % -1, from trapping
 * (anything modulo -1 is 0). */
#define TG_INT_DIVISOR_OK(y) ((y) != 0 && (y) != (scalar_t)-1)
#define TG_BINARY_INT_FORMULAS(X)                                                              \
    X(FMOD, TG_INT_DIVISOR_OK(y) ? (scalar_t)(x % y) : (scalar_t)0)                            \
    X(REMAINDER, TG_INT_DIVISOR_OK(y) ? (scalar_t)TG_REMAINDER_OF((scalar_t)(x % y), y) : (scalar_t)0)

#endif
