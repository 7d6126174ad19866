/* CUDA entry points of ops/cuda/reduce.cu (weak: NULL without CUDA). Called by
 * ops/reduce.c, ops/reduce_extrema.c and ops/reduce_stats.c. `reduce[d]` says
 * whether dim d of x is reduced; outputs are preallocated, contiguous, with the
 * reduced shape (keepdim or not: only the element order matters). */
#ifndef TG_OPS_CUDA_REDUCE_H
#define TG_OPS_CUDA_REDUCE_H

#include <stdbool.h>

#include "core/tensor.h"
#include "ops/reduce_formulas.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (the reduced shape, x's dtype) = sum of x over the dims where reduce[d]. */
tg_status tg_cuda_sum(tg_tensor *out, tg_tensor *x, const bool *reduce) __attribute__((weak));

/* Max (is_max) or min over the reduced dims. values (x's dtype) and/or indices (int64,
 * the position of the first extreme element counted row-major over the reduced dims;
 * for one reduced dim, the index along it) may be NULL. NaN wins (propagates), as in
 * PyTorch. Float32/float64/int64/int32/uint8/bool. */
tg_status tg_cuda_extreme(tg_tensor *values, tg_tensor *indices, tg_tensor *x, const bool *reduce, bool is_max)
    __attribute__((weak));
/* out = the statistic of a row of ops/reduce_formulas.h (var, std, logsumexp, norm:
 * `kind`, after its first pass) over the reduced dims, q the row's parameter, in
 * double, rounded once; `op` names the caller in errors. float32 and float64. */
tg_status tg_cuda_stat(const char *op, tg_tensor *out, tg_tensor *x, const bool *reduce, tg_reduce_kind kind, double q)
    __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
