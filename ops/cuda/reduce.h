/* CUDA entry points of ops/cuda/reduce.cu (weak: NULL without CUDA). Called by
 * ops/reduce.c, ops/reduce_extrema.c and ops/reduce_stats.c. `reduce[d]` says
 * whether dim d of x is reduced; outputs are preallocated, contiguous, with the
 * reduced shape (keepdim or not: only the element order matters). */
#ifndef TG_OPS_CUDA_REDUCE_H
#define TG_OPS_CUDA_REDUCE_H

#include <stdbool.h>

#include "core/tensor.h"

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
/* out = sum((x - mean)^2) / (N - correction) over the reduced dims (correction 1:
 * unbiased). Floating dtypes. */
tg_status tg_cuda_var(tg_tensor *out, tg_tensor *x, const bool *reduce, double correction) __attribute__((weak));
/* out = log(sum(exp(x - m))) + m, m the max over the reduced dims (0 where m is +-inf). */
tg_status tg_cuda_logsumexp(tg_tensor *out, tg_tensor *x, const bool *reduce) __attribute__((weak));
/* out = (sum |x|^p)^(1/p) over the reduced dims; p == INFINITY: max |x|. p > 0. */
tg_status tg_cuda_norm(tg_tensor *out, tg_tensor *x, const bool *reduce, double p) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
