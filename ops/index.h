/* Boolean and advanced indexing, as PyTorch's: nonzero, masked_select, x[mask]
 * (tg_index_mask) and index_put (x[indices] = values, with accumulate). The positions
 * are read on the host (as PyTorch's nonzero syncs with the GPU), then index_select,
 * take and index_add do the work on x's device, so gradients come from those and
 * differentiate again. Each returns a NEW reference, or NULL with a message naming the
 * op and the shapes. */
#ifndef TG_OPS_INDEX_H
#define TG_OPS_INDEX_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.nonzero(x): int64 [count, ndim], the coordinates of the non-zero (true)
 * elements in row-major order. Not differentiable. */
tg_tensor *tg_nonzero(tg_tensor *x);
/* torch.masked_select(x, mask): the elements of x where the bool mask is true, x and
 * mask broadcast together, as a 1-D tensor in row-major order. */
tg_tensor *tg_masked_select(tg_tensor *x, tg_tensor *mask);
/* x[mask] for a bool mask whose shape is x's first mask.ndim dims (PyTorch requires
 * them equal): [count, x's remaining dims...]; a mask of x's shape gives
 * masked_select's 1-D result, a 0-dim mask x[None] or an empty [0, ...]. */
tg_tensor *tg_index_mask(tg_tensor *x, tg_tensor *mask);
/* torch.index_put(x, indices, values, accumulate): a copy of x with
 * x[indices[0], ..., indices[count-1]] = values (or += with accumulate). The int64
 * index tensors (negative from the end) broadcast together and index x's first
 * `count` dims; a bool index stands for its nonzero coordinates over as many dims
 * (masked assignment: x[mask] = values). values broadcast to [index shape, x's
 * remaining dims]. Without accumulate a position named twice takes the last value
 * (PyTorch leaves that undefined) and the overwritten values get no gradient. */
tg_tensor *tg_index_put(tg_tensor *x, tg_tensor *const *indices, int count, tg_tensor *values, bool accumulate);

#ifdef __cplusplus
}
#endif
#endif
