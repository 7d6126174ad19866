/* Sorting and order statistics along a dim: torch.sort, argsort, topk, kthvalue and
 * median. One stable sort order (ops/sort_line.h, the same merge sort on the CPU and
 * on CUDA) gives the int64 indices; the values are tg_gather(x, dim, indices), so the
 * gradient is gather's (a scatter to the indices) and differentiates again. PyTorch's
 * order: NaN above every number; equal values keep their index order (also
 * descending, as PyTorch's stable=True). Each returns the values as a NEW reference
 * and, when `indices` is not NULL, the int64 indices there (a NEW reference); NULL
 * with a message naming the op on bad input. A 0-dim x is a line of one (dim 0 or -1). */
#ifndef TG_OPS_SORT_H
#define TG_OPS_SORT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.sort(x, dim, descending, stable=True). Any dtype but float16/bfloat16. */
tg_tensor *tg_sort(tg_tensor *x, int dim, bool descending, tg_tensor **indices);
/* torch.argsort(x, dim, descending): the indices of tg_sort. */
tg_tensor *tg_argsort(tg_tensor *x, int dim, bool descending);
/* torch.topk(x, k, dim, largest, sorted): the k largest (smallest) along dim,
 * 0 <= k <= size. Always in sorted order (PyTorch's sorted=false leaves the order
 * unspecified; this order is one of those). Equal values are taken in index order;
 * PyTorch leaves that to its selection algorithm (same values, maybe other indices). */
tg_tensor *tg_topk(tg_tensor *x, int64_t k, int dim, bool largest, bool sorted, tg_tensor **indices);
/* torch.kthvalue(x, k, dim, keepdim): the k-th smallest (1 <= k <= size); among equal
 * values, the index of the k-th in index order (as topk). */
tg_tensor *tg_kthvalue(tg_tensor *x, int64_t k, int dim, bool keepdim, tg_tensor **indices);
/* torch.median(x, dim, keepdim): the lower median (element (size - 1) / 2 in order);
 * a line holding NaN gives NaN and the index of its first NaN, as PyTorch. */
tg_tensor *tg_median_dim(tg_tensor *x, int dim, bool keepdim, tg_tensor **indices);
/* torch.median(x): the lower median of all elements, 0-dim (NaN for an empty x). */
tg_tensor *tg_median(tg_tensor *x);

#ifdef __cplusplus
}
#endif
#endif
