/* Parsing the dims argument of reductions, shared by ops/reduce*.c and ops/softmax.c. */
#ifndef TG_OPS_REDUCE_DIMS_H
#define TG_OPS_REDUCE_DIMS_H

#include <stdbool.h>

#include "core/error.h"
#include "core/tensor_impl.h"

/* Parses dims into a mask (mask[d]: dim d is reduced); all dims when num_dims == 0.
 * A 0-dim tensor accepts dim 0 and -1, as in PyTorch. */
static inline tg_status tg_reduce_dims_mask(const char *op, const tg_tensor *t, const int *dims, int num_dims,
                                            bool *mask) {
    int nd = t->shape.ndim;
    for (int d = 0; d < TG_MAX_DIMS; d++) mask[d] = num_dims == 0 && d < nd;
    for (int i = 0; i < num_dims; i++) {
        int d = tg_wrap_dim(dims[i], nd > 0 ? nd : 1);
        if (d < 0) return tg_error("%s: dim %d out of range for a tensor with %d dims", op, dims[i], nd);
        if (nd == 0) continue;
        if (mask[d]) return tg_error("%s: dim %d appears twice in the dims list", op, d);
        mask[d] = true;
    }
    return TG_OK;
}

/* The shape after reducing the masked dims (kept as size 1 with keepdim). */
static inline tg_shape tg_reduced_shape(tg_shape s, const bool *mask, bool keepdim) {
    tg_shape r = {0};
    for (int d = 0; d < s.ndim; d++) {
        if (!mask[d]) r.dims[r.ndim++] = s.dims[d];
        else if (keepdim) r.dims[r.ndim++] = 1;
    }
    return r;
}

/* Number of elements each output element reduces. */
static inline int64_t tg_reduced_count(tg_shape s, const bool *mask) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++)
        if (mask[d]) n *= s.dims[d];
    return n;
}

#endif
