/* CUDA entry points of ops/cuda/softmax.cu (weak: NULL without CUDA), called by
 * ops/softmax.c. */
#ifndef TG_OPS_CUDA_SOFTMAX_H
#define TG_OPS_CUDA_SOFTMAX_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (contiguous, x's shape and floating dtype) = softmax (or log_softmax when
 * `log`) of x along dim (already wrapped, 0 <= dim < ndim; x any strides). Stable:
 * subtracts the row max first. */
tg_status tg_cuda_softmax(tg_tensor *out, tg_tensor *x, int dim, bool log) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
