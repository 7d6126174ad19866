/* CUDA entry point of ops/cuda/sort.cu (weak: NULL without CUDA), called by ops/sort.c. */
#ifndef TG_OPS_CUDA_SORT_H
#define TG_OPS_CUDA_SORT_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* order (int64, contiguous, x's shape) = the stable sort order of each line of x along
 * dim (wrapped; x any strides, any dtype but float16); scratch: an int64 device tensor
 * of at least 2 * numel(x) elements. */
tg_status tg_cuda_sort_order(tg_tensor *order, tg_tensor *x, int dim, bool descending, tg_tensor *scratch)
    __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
