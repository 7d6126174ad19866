/* How CPU reductions walk memory: the input's dims split into kept ("outer", one
 * output element each) and reduced ("inner") dims, each with the input's strides.
 * Shared by every reduction kernel in ops/ (sum, max, var, softmax, ...). */
#ifndef TG_OPS_REDUCE_PLAN_H
#define TG_OPS_REDUCE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/host_device.h"
#include "core/tensor_impl.h"

typedef struct {
    int outer_ndim, inner_ndim;
    int64_t outer_shape[TG_MAX_DIMS], outer_strides[TG_MAX_DIMS]; /* in elements */
    int64_t inner_shape[TG_MAX_DIMS], inner_strides[TG_MAX_DIMS];
    int64_t outer_numel, inner_numel;
} tg_reduce_plan;

/* reduce[d] says whether dim d of x is reduced. Inner dims are ordered so that the
 * fastest-moving (smallest stride) is last. */
static inline void tg_reduce_plan_init(tg_reduce_plan *p, const tg_tensor *x, const bool *reduce) {
    p->outer_ndim = p->inner_ndim = 0;
    p->outer_numel = p->inner_numel = 1;
    for (int d = 0; d < x->shape.ndim; d++) {
        if (reduce[d]) {
            p->inner_shape[p->inner_ndim] = x->shape.dims[d];
            p->inner_strides[p->inner_ndim++] = x->strides[d];
            p->inner_numel *= x->shape.dims[d];
        } else {
            p->outer_shape[p->outer_ndim] = x->shape.dims[d];
            p->outer_strides[p->outer_ndim++] = x->strides[d];
            p->outer_numel *= x->shape.dims[d];
        }
    }
    /* Merge inner dims that are contiguous with each other (common: [C, H, W] -> one run). */
    int out = 0;
    for (int d = 0; d < p->inner_ndim; d++) {
        if (p->inner_shape[d] == 1) continue;
        if (out > 0 && p->inner_strides[out - 1] == p->inner_strides[d] * p->inner_shape[d]) {
            p->inner_shape[out - 1] *= p->inner_shape[d];
            p->inner_strides[out - 1] = p->inner_strides[d];
            continue;
        }
        p->inner_shape[out] = p->inner_shape[d];
        p->inner_strides[out++] = p->inner_strides[d];
    }
    p->inner_ndim = out;
}

/* The plans of a kernel that walks x and out (one shape) line by line along dim, as
 * sort, scan and softmax do on both devices: each plan's inner part is that dim (none
 * when its size is 1). Returns the number of lines to run; 0 when there is nothing to
 * do (no line, or empty lines). */
static inline int64_t tg_line_plans(const tg_tensor *x, const tg_tensor *out, int dim, tg_reduce_plan *px,
                                    tg_reduce_plan *po) {
    bool mask[TG_MAX_DIMS] = {false};
    mask[dim] = true;
    tg_reduce_plan_init(px, x, mask);
    tg_reduce_plan_init(po, out, mask);
    return px->inner_numel == 0 ? 0 : px->outer_numel;
}

/* Offset (elements, from x's first element) of output element o's first input. The
 * offsets are compiled for both devices: the CPU loops and the CUDA kernels
 * (ops/cuda/reduce.cu, scan.cu, sort.cu, softmax.cu) walk their lines with them. */
TG_HD_INLINE int64_t tg_reduce_outer_offset(const tg_reduce_plan *p, int64_t o) {
    if (p->outer_ndim == 1) return o * p->outer_strides[0];
    int64_t off = 0;
    for (int d = p->outer_ndim - 1; d >= 0; d--) {
        off += (o % p->outer_shape[d]) * p->outer_strides[d];
        o /= p->outer_shape[d];
    }
    return off;
}

/* Offset of the k-th reduced element (row-major over the inner dims). */
TG_HD_INLINE int64_t tg_reduce_inner_offset(const tg_reduce_plan *p, int64_t k) {
    if (p->inner_ndim == 1) return k * p->inner_strides[0];
    int64_t off = 0;
    for (int d = p->inner_ndim - 1; d >= 0; d--) {
        off += (k % p->inner_shape[d]) * p->inner_strides[d];
        k /= p->inner_shape[d];
    }
    return off;
}

#endif
