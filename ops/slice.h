/* Views that pick part of a tensor: select, slice with a step, diagonal, and the
 * splits built on them (chunk, split, unbind), as PyTorch's. Each result shares t's
 * storage (tg_make_view checks its geometry) and is differentiable: the gradient is
 * the incoming one written into zeros of t's shape through the same view (and its
 * own gradient is the view again, so second derivatives work). CPU and CUDA alike:
 * only strides change. Dims may be negative (counted from the end). Each returns a
 * NEW reference, or NULL with a message naming the op, the shape and the value. */
#ifndef TG_OPS_SLICE_H
#define TG_OPS_SLICE_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.select(t, dim, index) / t[..., index, ...]: dim removed; index may be
 * negative. */
tg_tensor *tg_select(tg_tensor *t, int dim, int64_t index);
/* t[start:end:step] along dim, as Python slicing: start and end may be negative and
 * are clamped to [0, size]; step must be positive (PyTorch's rule). Use
 * TG_SLICE_END for "to the end". */
#define TG_SLICE_END INT64_MAX
tg_tensor *tg_slice(tg_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
/* torch.diagonal(t, offset, dim1, dim2): the two dims removed, the diagonal appended
 * last; offset > 0 above the main diagonal, < 0 below. */
tg_tensor *tg_diagonal(tg_tensor *t, int64_t offset, int dim1, int dim2);

/* The splits write their views into parts[] (new references) and return how many,
 * or -1 with a message; parts must have room for max_parts. */
/* torch.chunk(t, chunks, dim): pieces of ceil(size / chunks), the last smaller;
 * fewer than `chunks` when the size does not allow more (as PyTorch). */
int tg_chunk(tg_tensor *t, int chunks, int dim, tg_tensor **parts, int max_parts);
/* torch.split(t, split_size, dim): pieces of split_size, the last smaller. */
int tg_split(tg_tensor *t, int64_t split_size, int dim, tg_tensor **parts, int max_parts);
/* torch.split(t, [sizes], dim): sizes must add up to the size of dim. */
int tg_split_sizes(tg_tensor *t, const int64_t *sizes, int count, int dim, tg_tensor **parts, int max_parts);
/* torch.unbind(t, dim): the size of dim many selects. */
int tg_unbind(tg_tensor *t, int dim, tg_tensor **parts, int max_parts);

#ifdef __cplusplus
}
#endif
#endif
