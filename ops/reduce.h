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

/* torch.max(t) / torch.min(t): the largest / smallest element (0-dim). Gradient goes
 * to the extreme elements (split evenly among ties, as PyTorch's amax). */
tg_tensor *tg_max(tg_tensor *t);
tg_tensor *tg_min(tg_tensor *t);
/* torch.max(t, dim, keepdim): values, and *indices (int64, a new reference) when
 * indices is not NULL. Gradient flows to the first maximal index. */
tg_tensor *tg_max_dim(tg_tensor *t, int dim, bool keepdim, tg_tensor **indices);
tg_tensor *tg_min_dim(tg_tensor *t, int dim, bool keepdim, tg_tensor **indices);
/* torch.amax / torch.amin(t, dims, keepdim): the extreme over dims (num_dims 0:
 * all), NaN winning; the gradient is split evenly among the elements equal to it. */
tg_tensor *tg_amax(tg_tensor *t, const int *dims, int num_dims, bool keepdim);
tg_tensor *tg_amin(tg_tensor *t, const int *dims, int num_dims, bool keepdim);
/* torch.argmax / argmin(t, dim, keepdim) -> int64. */
tg_tensor *tg_argmax(tg_tensor *t, int dim, bool keepdim);
tg_tensor *tg_argmin(tg_tensor *t, int dim, bool keepdim);
/* torch.var / std over dims (num_dims 0: all), unbiased (Bessel) or not. */
tg_tensor *tg_var(tg_tensor *t, const int *dims, int num_dims, bool unbiased, bool keepdim);
tg_tensor *tg_std(tg_tensor *t, const int *dims, int num_dims, bool unbiased, bool keepdim);
/* torch.logsumexp(t, dim, keepdim), stable. */
tg_tensor *tg_logsumexp(tg_tensor *t, int dim, bool keepdim);
/* torch.linalg.vector_norm(t, ord, dims, keepdim): p-norm (p > 0; INFINITY for max-abs). */
tg_tensor *tg_norm(tg_tensor *t, double p, const int *dims, int num_dims, bool keepdim);
/* torch.softmax / log_softmax along dim (own kernels and backward). */
tg_tensor *tg_softmax(tg_tensor *t, int dim);
tg_tensor *tg_log_softmax(tg_tensor *t, int dim);

#ifdef __cplusplus
}
#endif
#endif
