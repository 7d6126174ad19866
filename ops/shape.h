/* Shape ops: views that share storage (view, reshape, transpose, permute, narrow,
 * expand, squeeze/unsqueeze, flatten) and copies (contiguous, cat, stack,
 * index_select, gather, one_hot). Differentiable; each returns a NEW reference or
 * NULL with a message (names the op and the shapes). Dims may be negative
 * (counted from the end), as in PyTorch. */
#ifndef TG_OPS_SHAPE_H
#define TG_OPS_SHAPE_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.Tensor.view: same storage, new shape (one size may be -1). Fails when the
 * sizes do not match or the strides do not allow a view (use tg_reshape). */
tg_tensor *tg_view(tg_tensor *t, tg_shape shape);
/* torch.reshape: a view when possible, else a contiguous copy. */
tg_tensor *tg_reshape(tg_tensor *t, tg_shape shape);
/* torch.flatten(t, start_dim, end_dim). */
tg_tensor *tg_flatten(tg_tensor *t, int start_dim, int end_dim);
/* torch.squeeze(t, dim): removes dim when its size is 1 (else returns a view of t). */
tg_tensor *tg_squeeze(tg_tensor *t, int dim);
/* torch.unsqueeze(t, dim): inserts a size-1 dim at dim (in [-ndim-1, ndim]). */
tg_tensor *tg_unsqueeze(tg_tensor *t, int dim);
/* torch.transpose(t, dim0, dim1). */
tg_tensor *tg_transpose(tg_tensor *t, int dim0, int dim1);
/* torch.permute(t, dims): dims has tg_ndim(t) entries, a permutation. */
tg_tensor *tg_permute(tg_tensor *t, const int *dims);
/* torch.narrow(t, dim, start, length). */
tg_tensor *tg_narrow(tg_tensor *t, int dim, int64_t start, int64_t length);
/* torch.Tensor.expand: size-1 dims (and new leading dims) broadcast to shape; -1
 * keeps a size. A view with stride 0. */
tg_tensor *tg_expand(tg_tensor *t, tg_shape shape);
/* torch.clone: a contiguous copy with its own storage, same dtype and device; the
 * gradient flows through it unchanged. */
tg_tensor *tg_clone(tg_tensor *t);
/* torch.Tensor.contiguous: t itself (a new reference) when already contiguous. */
tg_tensor *tg_contiguous(tg_tensor *t);

/* torch.cat(tensors, dim): same shapes except along dim; same dtype and device. As in
 * PyTorch, 1-D empty tensors (shape [0]) among others are skipped. */
tg_tensor *tg_cat(tg_tensor *const *tensors, int count, int dim);
/* torch.stack(tensors, dim): equal shapes, new dim. */
tg_tensor *tg_stack(tg_tensor *const *tensors, int count, int dim);
/* torch.index_select(t, dim, index): index is a 1-D int64 (or int32) tensor. */
tg_tensor *tg_index_select(tg_tensor *t, int dim, tg_tensor *index);
/* torch.gather(t, dim, index): index int64 with t's ndim. */
tg_tensor *tg_gather(tg_tensor *t, int dim, tg_tensor *index);
/* torch.scatter_add(t, dim, index, src): t with src[i][j][k] added at
 * [i][index[i][j][k]][k] (dim 1; likewise for any dim). index int64 with t's ndim and
 * src's shape (tapegrad requires src and index to have the same shape; PyTorch allows
 * a larger src). Differentiable in t and src (the gradient of the latter is a gather). */
tg_tensor *tg_scatter_add(tg_tensor *t, int dim, tg_tensor *index, tg_tensor *src);
/* torch.index_add(t, dim, index, src): t with the slices of src along dim added at
 * the positions index (1-D int64/int32; repeated indices accumulate). Differentiable
 * in t and src (the gradient of the latter is an index_select). */
tg_tensor *tg_index_add(tg_tensor *t, int dim, tg_tensor *index, tg_tensor *src);
/* torch.nn.functional.one_hot(index, num_classes) -> int64 [..., num_classes];
 * num_classes -1 means max(index) + 1. Not differentiable. */
tg_tensor *tg_one_hot(tg_tensor *index, int64_t num_classes);

/* Options of tg_embedding and tg_nn_embedding; zero fields: no padding_idx (PyTorch's None). */
typedef struct {
    bool use_padding_idx; /* true: padding_idx below is used (0 is a valid index, so it needs the flag) */
    int64_t padding_idx;  /* in [-num, num); negative counts from the end */
} tg_embedding_opts;

/* torch.nn.functional.embedding: rows of weight [num, dim] picked by int64 (or int32)
 * indices [...] -> [..., dim]. Gradient accumulates into the picked rows, except
 * the padding_idx row, which gets none (its row is still returned). Fails on an
 * index or a padding_idx out of range, naming the value. */
tg_tensor *tg_embedding(tg_tensor *weight, tg_tensor *indices, tg_embedding_opts opts);

#ifdef __cplusplus
}
#endif
#endif
