/* Rearranging ops built from views and copies that already have gradients
 * (permute, view, expand, reshape, slice, cat, index_select): movedim, unflatten,
 * repeat, tile, roll and repeat_interleave, as PyTorch's. Being compositions, they run on any device and differentiate
 * to any order with no formula of their own. Each returns a NEW reference, or NULL
 * with a message naming the op and the offending values. */
#ifndef TG_OPS_REARRANGE_H
#define TG_OPS_REARRANGE_H

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.movedim(t, source, destination): dim `source` moved to position
 * `destination`, the others keeping their order (a view). */
tg_tensor *tg_movedim(tg_tensor *t, int source, int destination);
/* torch.unflatten(t, dim, sizes): dim split into sizes[0..count) (one may be -1);
 * a view, so it fails where tg_view would. */
tg_tensor *tg_unflatten(tg_tensor *t, int dim, const int64_t *sizes, int count);
/* torch.Tensor.repeat(repeats): count >= ndim; new leading dims for the extra
 * repeats. A copy. */
tg_tensor *tg_repeat(tg_tensor *t, const int64_t *repeats, int count);
/* torch.tile(t, reps): as repeat, with reps padded by leading 1s when shorter than
 * the tensor's dims. */
tg_tensor *tg_tile(tg_tensor *t, const int64_t *reps, int count);
/* torch.roll(t, shift, dim): elements shifted along dim, wrapping around (negative
 * shifts go the other way). A copy. */
tg_tensor *tg_roll(tg_tensor *t, int64_t shift, int dim);
/* torch.repeat_interleave(t, repeats, dim): each element along dim repeated `repeats`
 * times in place (x0 x0 x1 x1 ...). tg_repeat_interleave_tensor takes a 1-D int64 or
 * int32 tensor of repeats, one per element along dim (or one for all), read on the
 * host. PyTorch's dim=None (flatten first) is tg_flatten(t, 0, -1) then dim 0. Copies;
 * negative repeats are an error. */
tg_tensor *tg_repeat_interleave(tg_tensor *t, int64_t repeats, int dim);
tg_tensor *tg_repeat_interleave_tensor(tg_tensor *t, tg_tensor *repeats, int dim);

#ifdef __cplusplus
}
#endif
#endif
