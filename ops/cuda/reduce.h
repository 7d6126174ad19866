/* CUDA entry points of ops/cuda/reduce.cu (weak: NULL without CUDA). */
#ifndef TG_OPS_CUDA_REDUCE_H
#define TG_OPS_CUDA_REDUCE_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (the reduced shape, x's dtype) = sum of x over the dims where reduce[d]. */
tg_status tg_cuda_sum(tg_tensor *out, tg_tensor *x, const bool *reduce) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
