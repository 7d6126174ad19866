/* The statistical reductions (var, std, logsumexp, vector norm), one row each: the one
 * definition both devices compile, as ops/unary_formulas.h is for the unary ops.
 * A row is X(KIND, name, api, autocast, first, identity, map, combine, finalise, gradient):
 * - KIND: the kind's name after TG_REDUCE_ (the enum below is generated);
 * - name: the op's name, tg_<name> its public function;
 * - api: CORRECTION generates `tg_<name>(t, dims, num_dims, unbiased, keepdim)` (q is
 *   1 unbiased, 0 not), DIM `tg_<name>(t, dim, keepdim)` (q is 0); OWN: the function
 *   takes other parameters and is written in ops/reduce_stats.c; NONE: an internal
 *   pass (another row's first pass), no op;
 * - autocast: NONE, or FLOAT32_ON_CUDA (PyTorch's CUDA autocast float32 list);
 * - first: the row whose result c this row's map and finalise read (var reads the
 *   mean), or NONE;
 * - identity, map, combine, finalise: doubles. Each line of n reduced elements x (as
 *   double) gives finalise(combine(...combine(identity, map(x0)), ..., map(x(n-1)))),
 *   with acc the accumulator, a and b two accumulators, n the count (double), c the
 *   first pass's result and q the op's parameter. The CPU combines in element order
 *   (ops/cpu/stats_kernels.h); the CUDA kernels also combine partial accumulators
 *   (ops/cuda/reduce.cu), so combine is associative up to rounding and identity is
 *   neutral;
 * - gradient: the input's gradient as ops on g (the output's gradient), x (the input),
 *   y (the output), g and y with the reduced dims kept as size 1, n, q and the
 *   reduced dims (dims, nd); ops, so it runs on any device and differentiates again.
 *   A longer one is a static function of ops/reduce_stats.c named in the column.
 * Accumulated in double for float32 and float64 on both devices, rounded once.
 * docs/design.md: adding a reduction. */
#ifndef TG_OPS_REDUCE_FORMULAS_H
#define TG_OPS_REDUCE_FORMULAS_H

#include <math.h>

#include "core/host_device.h"

/* clang-format off */
#define TG_REDUCE_FORMULAS(X)                                                                   \
    X(MEAN_PASS, mean_pass, NONE, NONE, NONE, /* var's and std's first pass */                  \
      0, x, a + b, acc / n,                                                                     \
      NULL)                                                                                     \
    X(SHIFT_PASS, shift_pass, NONE, NONE, NONE, /* logsumexp's: the max, NaN skipped */         \
      -INFINITY, x, b > a ? b : a, isinf(acc) ? 0 : acc, /* an infinite max shifts by 0 */      \
      NULL)                                                                                     \
    X(VAR, var, CORRECTION, NONE, MEAN_PASS, /* divided by max(0, N - correction) */            \
      0, (x - c) * (x - c), a + b, acc / fmax(0.0, n - q),                                      \
      var_backward(g, x, dims, nd, n, q))                                                       \
    X(STD, std, CORRECTION, NONE, MEAN_PASS,                                                    \
      0, (x - c) * (x - c), a + b, sqrt(acc / fmax(0.0, n - q)),                                \
      var_backward(zero_where_zero(y, tg_div(g, tg_mul_scalar(y, 2))), x, dims, nd, n, q))      \
    X(LOGSUMEXP, logsumexp, DIM, FLOAT32_ON_CUDA, SHIFT_PASS,                                   \
      0, exp(x - c), a + b, log(acc) + c,                                                       \
      tg_mul(g, tg_exp(tg_sub(x, y))))                                                          \
    X(NORM, norm, OWN, FLOAT32_ON_CUDA, NONE, /* q: p; inf: the max |x|, a NaN winning */       \
      0, isinf(q) || q == 1 ? fabs(x) : q == 2 ? fabs(x) * fabs(x) : pow(fabs(x), q),           \
      isinf(q) ? (b > a || b != b ? b : a) : a + b,                                             \
      q == 2 ? sqrt(acc) : isinf(q) || q == 1 ? acc : pow(acc, 1 / q),                          \
      norm_backward(g, x, y, q, dims, nd))
/* clang-format on */

/* One kind per row (TG_REDUCE_VAR, ...), in the rows' order; TG_REDUCE_NONE: no pass. */
#define TG_REDUCE_KIND_ENTRY(KIND, name, api, autocast, first, identity, map, combine, finalise, grad) TG_REDUCE_##KIND,
typedef enum { TG_REDUCE_NONE = -1, TG_REDUCE_FORMULAS(TG_REDUCE_KIND_ENTRY) TG_REDUCE_COUNT } tg_reduce_kind;
#undef TG_REDUCE_KIND_ENTRY

/* The columns as functions of the kind, for both devices; a constant kind folds the
 * switch away. */
#define TG_REDUCE_FIRST_CASE(KIND, name, api, autocast, first, identity, map, combine, finalise, grad) \
    case TG_REDUCE_##KIND:                                                                             \
        return TG_REDUCE_##first;
#define TG_REDUCE_IDENTITY_CASE(KIND, name, api, autocast, first, identity, map, combine, finalise, grad) \
    case TG_REDUCE_##KIND:                                                                                \
        return identity;
#define TG_REDUCE_MAP_CASE(KIND, name, api, autocast, first, identity, map, combine, finalise, grad) \
    case TG_REDUCE_##KIND:                                                                           \
        return map;
#define TG_REDUCE_COMBINE_CASE(KIND, name, api, autocast, first, identity, map, combine, finalise, grad) \
    case TG_REDUCE_##KIND:                                                                               \
        return combine;
#define TG_REDUCE_FINALISE_CASE(KIND, name, api, autocast, first, identity, map, combine, finalise, grad) \
    case TG_REDUCE_##KIND: return finalise;

TG_HD_INLINE tg_reduce_kind tg_reduce_first(tg_reduce_kind kind) {
    switch (kind) {
        TG_REDUCE_FORMULAS(TG_REDUCE_FIRST_CASE)
    default: return TG_REDUCE_NONE;
    }
}

TG_HD_INLINE double tg_reduce_identity(tg_reduce_kind kind, double q) {
    switch (kind) {
        TG_REDUCE_FORMULAS(TG_REDUCE_IDENTITY_CASE)
    default: return 0;
    }
}

TG_HD_INLINE double tg_reduce_map(tg_reduce_kind kind, double x, double c, double q) {
    switch (kind) {
        TG_REDUCE_FORMULAS(TG_REDUCE_MAP_CASE)
    default: return 0;
    }
}

TG_HD_INLINE double tg_reduce_combine(tg_reduce_kind kind, double a, double b, double q) {
    switch (kind) {
        TG_REDUCE_FORMULAS(TG_REDUCE_COMBINE_CASE)
    default: return 0;
    }
}

TG_HD_INLINE double tg_reduce_finalise(tg_reduce_kind kind, double acc, double n, double c, double q) {
    switch (kind) {
        TG_REDUCE_FORMULAS(TG_REDUCE_FINALISE_CASE)
    default: return 0;
    }
}

#undef TG_REDUCE_FIRST_CASE
#undef TG_REDUCE_IDENTITY_CASE
#undef TG_REDUCE_MAP_CASE
#undef TG_REDUCE_COMBINE_CASE
#undef TG_REDUCE_FINALISE_CASE

#endif
