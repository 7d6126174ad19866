/* Reductions over dims (with keepdim), softmax and friends. Each returns a NEW
 * reference or NULL with a message. Dims may be negative. `dims` arrays name each
 * dim at most once; num_dims 0 means all dims. */
#ifndef TG_OPS_REDUCE_H
#define TG_OPS_REDUCE_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.sum(t): all elements, a 0-dim tensor (int inputs sum to int64). */
tg_tensor *tg_sum(tg_tensor *t);
/* torch.sum(t, dims, keepdim). */
tg_tensor *tg_sum_dims(tg_tensor *t, const int *dims, int num_dims, bool keepdim);
tg_tensor *tg_sum_dim(tg_tensor *t, int dim, bool keepdim);
/* torch.mean (floating inputs). */
tg_tensor *tg_mean(tg_tensor *t);
tg_tensor *tg_mean_dims(tg_tensor *t, const int *dims, int num_dims, bool keepdim);
tg_tensor *tg_mean_dim(tg_tensor *t, int dim, bool keepdim);
/* Sums t down to `shape`, which must broadcast to t's shape (the reverse of
 * expand; how broadcast gradients are reduced). */
tg_tensor *tg_sum_to(tg_tensor *t, tg_shape shape);

#ifdef __cplusplus
}
#endif
#endif
