/* CUDA entry points of ops/cuda/gather.cu (weak: NULL without CUDA), called by
 * ops/gather.c. Tensors are on one device; `dim` is already wrapped. Index tensors
 * are contiguous int64. An index out of range must be reported as an error (e.g. a
 * device-side flag read back) naming the op, not a crash. cat and stack need no
 * entry (they copy with tg_copy_values_). */
#ifndef TG_OPS_CUDA_GATHER_H
#define TG_OPS_CUDA_GATHER_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out [..., n, ...] = x [..., size, ...] picked along dim by index [n]; x and out contiguous. */
tg_status tg_cuda_index_select(tg_tensor *out, tg_tensor *x, int dim, tg_tensor *index) __attribute__((weak));
/* out [..., size, ...] += src [..., n, ...] along dim at index [n] (atomic: repeated indices
 * accumulate); out and src contiguous. */
tg_status tg_cuda_index_add(tg_tensor *out, int dim, tg_tensor *index, tg_tensor *src) __attribute__((weak));
/* out[i][j][k] = x[i][index[i][j][k]][k] (dim 1; likewise for any dim); out has index's
 * shape; x, index and out contiguous. */
tg_status tg_cuda_gather(tg_tensor *out, tg_tensor *x, int dim, tg_tensor *index) __attribute__((weak));
/* out[i][index[i][j][k]][k] += src[i][j][k] (atomic); out, index and src contiguous. */
tg_status tg_cuda_scatter_add(tg_tensor *out, int dim, tg_tensor *index, tg_tensor *src) __attribute__((weak));
/* out [..., C] int64 zeros on entry; sets out[..., index[...]] = 1; index in [0, C). */
tg_status tg_cuda_one_hot(tg_tensor *out, tg_tensor *index) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif
